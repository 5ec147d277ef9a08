//! The household's three machines, as in the project's seeds, each a fake Ollama server in
//! realistic mode: parallel 1, Ollama's queue, a five-minute keep-alive and a 4,096-token
//! window; they differ in speed and in how many models fit at once.
//! [`household`] holds the numbers; docs/BENCHMARKS.md ("Household benchmark") has them
//! as a table.

use std::time::Duration;

use crate::testkit::fake_llm::{FakeLlm, FakeLlmServer, ModelSpec, Realism, Speed};

/// The chat model most people use.
pub const CHAT: &str = "qwen2.5:7b";
/// The coder model, only on the desktop.
pub const CODER: &str = "qwen2.5-coder:7b";
/// The small model.
pub const SMALL: &str = "llama3.2:3b";

/// One model on one machine.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Served {
    pub model: &'static str,
    pub speed: Speed,
    /// Bytes of weights, as `/api/tags` and `/api/ps` report them.
    pub size: u64,
    /// The model's own context length (`/api/show`); the window is still `num_ctx`.
    pub context_length: u32,
}

/// One machine of the household.
#[derive(Debug, Clone, PartialEq)]
pub struct Machine {
    pub name: &'static str,
    pub max_loaded: usize,
    pub models: Vec<Served>,
}

impl Machine {
    pub fn serves(&self, model: &str) -> bool {
        self.models.iter().any(|m| m.model == model)
    }

    /// Starts a fresh fake of this machine, `scale` times faster than life.
    pub async fn spawn(&self, scale: f64) -> std::io::Result<FakeLlmServer> {
        let chat = self.models.iter().find(|m| m.model == CHAT);
        let realism = Realism {
            max_loaded: self.max_loaded,
            time_scale: scale,
            speed: chat.map_or(Realism::default().speed, |m| m.speed),
            ..Realism::default()
        };
        self.models
            .iter()
            .fold(FakeLlm::builder().realistic(realism), |builder, m| {
                builder.model_spec(
                    ModelSpec::new(m.model)
                        .with_speed(m.speed)
                        .with_size(m.size)
                        .with_context_length(m.context_length),
                )
            })
            .spawn()
            .await
    }
}

const GB: u64 = 1_000_000_000;
const SEVEN_B: u64 = 4_700 * GB / 1_000;
const THREE_B: u64 = 2_000 * GB / 1_000;

fn speed(load_ms: u64, prompt_tps: f64, eval_tps: f64) -> Speed {
    Speed {
        load: Duration::from_millis(load_ms),
        prompt_tps,
        eval_tps,
    }
}

fn seven_b(model: &'static str, speed: Speed) -> Served {
    Served {
        model,
        speed,
        size: SEVEN_B,
        context_length: 32_768,
    }
}

fn three_b(speed: Speed) -> Served {
    Served {
        model: SMALL,
        speed,
        size: THREE_B,
        context_length: 131_072,
    }
}

/// `moon`, `ai-core` and `laptop`, in that order (the order of the client's URL list).
pub fn household() -> Vec<Machine> {
    let desktop = speed(3_000, 1_500.0, 80.0);
    vec![
        Machine {
            name: "moon",
            max_loaded: 2,
            models: vec![
                seven_b(CHAT, desktop),
                seven_b(CODER, desktop),
                three_b(speed(1_500, 3_000.0, 150.0)),
            ],
        },
        Machine {
            name: "ai-core",
            max_loaded: 1,
            models: vec![
                seven_b(CHAT, speed(6_000, 300.0, 27.0)),
                three_b(speed(3_000, 600.0, 50.0)),
            ],
        },
        Machine {
            name: "laptop",
            max_loaded: 1,
            models: vec![
                seven_b(CHAT, speed(10_000, 150.0, 10.0)),
                three_b(speed(5_000, 300.0, 20.0)),
            ],
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_small_model_is_faster_than_the_chat_model_on_every_machine() {
        for machine in household() {
            let of = |name: &str| {
                machine
                    .models
                    .iter()
                    .find(|m| m.model == name)
                    .map(|m| m.speed)
            };
            let (Some(chat), Some(small)) = (of(CHAT), of(SMALL)) else {
                panic!("{} lacks a model", machine.name);
            };
            assert!(small.load < chat.load, "{}", machine.name);
            assert!(small.prompt_tps > chat.prompt_tps, "{}", machine.name);
            assert!(small.eval_tps > chat.eval_tps, "{}", machine.name);
        }
    }

    #[test]
    fn only_the_desktop_has_the_coder_and_room_for_two() {
        let machines = household();
        let with_coder: Vec<&str> = machines
            .iter()
            .filter(|m| m.serves(CODER))
            .map(|m| m.name)
            .collect();
        assert_eq!(with_coder, ["moon"]);
        let room: Vec<usize> = machines.iter().map(|m| m.max_loaded).collect();
        assert_eq!(room, [2, 1, 1]);
    }
}
