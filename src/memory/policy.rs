//! Which turns memory may keep. The front doors ask [`thread_allows_memory`] for every
//! turn they build, before it is submitted.

use crate::domain::ThreadId;

/// Whether a turn in `thread` may be remembered: not in Open WebUI's temporary chats
/// (`temporary:…`) nor in its local ones (`local:…`).
pub fn thread_allows_memory(thread: &ThreadId) -> bool {
    let thread = thread.as_str();
    !(thread.starts_with("temporary:") || thread.starts_with("local:"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temporary_and_local_chats_are_not_remembered() {
        let allows = |t: &str| thread_allows_memory(&ThreadId::parse(t).unwrap());
        assert!(!allows("temporary:abc"));
        assert!(!allows("local:abc"));
        assert!(allows("chat-1"));
        assert!(allows("h-0123"));
    }
}
