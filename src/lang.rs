//! The language of a user's prompt, so that Coordinator's own texts (errors a chat shows,
//! the web lane's disclaimer and sources, the memory block) are written in it. Every layer
//! may use it: the front doors, the web lane and memory.

use serde::{Deserialize, Serialize};

/// The language answers and Coordinator's own texts are written in.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Lang {
    Ja,
    #[default]
    En,
}

impl Lang {
    /// The language's English name, as prompts to a model name it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Ja => "Japanese",
            Self::En => "English",
        }
    }
}

/// Japanese when the text holds any kana or kanji, English otherwise.
pub fn detect_language(text: &str) -> Lang {
    let japanese = text.chars().any(|c| {
        matches!(c,
            '\u{3040}'..='\u{30FF}' | '\u{31F0}'..='\u{31FF}' | '\u{3400}'..='\u{4DBF}'
            | '\u{4E00}'..='\u{9FFF}' | '\u{F900}'..='\u{FAFF}' | '\u{FF66}'..='\u{FF9F}')
    });
    if japanese { Lang::Ja } else { Lang::En }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn language_follows_kana_and_kanji() {
        assert_eq!(detect_language("この市の特産物をおしえて"), Lang::Ja);
        assert_eq!(detect_language("柏市"), Lang::Ja);
        assert_eq!(detect_language("カシワ"), Lang::Ja);
        assert_eq!(detect_language("What about its population?"), Lang::En);
        assert_eq!(detect_language("Ça coûte combien ?"), Lang::En);
    }
}
