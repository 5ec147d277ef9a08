//! The routing header and footer Coordinator can add to answers, and their removal when
//! those answers come back as history.

/// Removes Coordinator's own routing header and footer from an assistant message.
pub fn strip(text: &str) -> String {
    text.to_owned()
}
