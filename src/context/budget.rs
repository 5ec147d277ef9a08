//! Trimming a composed request to the room its window leaves: history oldest first (whole
//! turns, so a tool result never loses the call it answers), then memory items lowest
//! score first. System messages and the current prompt are never trimmed.
//!
//! Pure arithmetic over a cost function, so the service composes and this decides; see
//! [`crate::service`] for where it runs.

/// What trimming kept of a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Trim {
    /// History turns dropped from the start.
    pub turns_dropped: usize,
    /// The memory items kept, as indices into the scores given, in their order.
    pub memory_kept: Vec<usize>,
    /// The estimated prompt tokens of what is kept.
    pub tokens: u32,
}

/// Drops history turns oldest first, then memory items lowest score first, until
/// `cost(first_kept_turn, kept_memory)` is at most `room`. `Err` carries the cost with
/// every turn and item gone: what the prompt alone needs.
pub fn trim(
    turns: usize,
    scores: &[f32],
    room: u32,
    cost: impl Fn(usize, &[usize]) -> u32,
) -> Result<Trim, u32> {
    let mut first = 0;
    let mut kept: Vec<usize> = (0..scores.len()).collect();
    loop {
        let tokens = cost(first, &kept);
        if tokens <= room {
            return Ok(Trim {
                turns_dropped: first,
                memory_kept: kept,
                tokens,
            });
        }
        if first < turns {
            first += 1;
        } else if let Some(at) = lowest(scores, &kept) {
            kept.remove(at);
        } else {
            return Err(tokens);
        }
    }
}

/// The position in `kept` of the item with the lowest score (the last of equals: recall
/// lists the better match first).
fn lowest(scores: &[f32], kept: &[usize]) -> Option<usize> {
    kept.iter()
        .enumerate()
        .min_by(|(ia, a), (ib, b)| scores[**a].total_cmp(&scores[**b]).then(ib.cmp(ia)))
        .map(|(at, _)| at)
}

/// The room a window leaves for the prompt: the window less the answer's reserve, which
/// takes at most half of it (a client's huge `max_tokens` does not leave the prompt no room).
pub fn prompt_room(limit: u32, reserve: u32) -> u32 {
    limit - reserve.min(limit / 2)
}
