//! The open-file limit (RLIMIT_NOFILE). Every client connection holds a descriptor, and so
//! do the store, the queue, the backends' connections and the log. The usual soft limit is
//! 1024, far below the hard limit most systems allow, so it is raised at start; the
//! connection cap is then kept below it, leaving room for everything else.

/// Descriptors kept for everything but client connections.
pub const RESERVED_DESCRIPTORS: u64 = 256;

/// Raises the soft open-file limit to the hard limit, logs what it did, and returns the
/// limit now in force (`None` where it cannot be read).
#[cfg(unix)]
pub fn raise_nofile_limit() -> Option<u64> {
    use rlimit::Resource;
    let (soft, hard) = match Resource::NOFILE.get() {
        Ok(limits) => limits,
        Err(e) => {
            tracing::warn!(error = %e, "cannot read the open-file limit (RLIMIT_NOFILE)");
            return None;
        }
    };
    match rlimit::increase_nofile_limit(u64::MAX) {
        Ok(now) if now > soft => {
            tracing::info!(
                from = soft,
                to = now,
                hard,
                "raised the open-file limit (RLIMIT_NOFILE)"
            );
            Some(now)
        }
        Ok(now) => {
            tracing::info!(
                limit = now,
                hard,
                "the open-file limit (RLIMIT_NOFILE) is already at its hard limit"
            );
            Some(now)
        }
        Err(e) => {
            tracing::warn!(error = %e, soft, hard, "cannot raise the open-file limit (RLIMIT_NOFILE)");
            Some(soft)
        }
    }
}

#[cfg(not(unix))]
pub fn raise_nofile_limit() -> Option<u64> {
    None
}

/// The connection cap to use: `configured`, lowered (with a warning) to leave
/// [`RESERVED_DESCRIPTORS`] free under the open-file limit.
pub fn connection_cap(configured: usize, nofile: Option<u64>) -> usize {
    let Some(limit) = nofile else {
        return configured;
    };
    let room =
        usize::try_from(limit.saturating_sub(RESERVED_DESCRIPTORS).max(1)).unwrap_or(usize::MAX);
    if room < configured {
        tracing::warn!(
            configured,
            used = room,
            nofile = limit,
            "server.max_connections is above what the open-file limit leaves room for; using less"
        );
        return room;
    }
    configured
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cap_leaves_room_under_the_limit() {
        assert_eq!(connection_cap(2048, Some(1_048_576)), 2048);
        assert_eq!(connection_cap(2048, Some(1024)), 1024 - 256);
        assert_eq!(connection_cap(2048, Some(100)), 1);
        assert_eq!(connection_cap(2048, None), 2048);
    }

    #[cfg(unix)]
    #[test]
    fn raising_leaves_the_soft_limit_at_the_hard_one() {
        let now = raise_nofile_limit().unwrap();
        let (soft, hard) = rlimit::Resource::NOFILE.get().unwrap();
        assert_eq!(now, soft);
        assert!(soft == hard || cfg!(target_os = "macos"), "{soft} < {hard}");
    }
}
