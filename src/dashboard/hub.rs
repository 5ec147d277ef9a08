//! One snapshot shared by every viewer: built at most every [`MIN_INTERVAL`], whoever
//! asks, and only while someone asks (nothing runs when no page is open). Each viewer's
//! stream looks every [`MIN_INTERVAL`] and sends the picture only when it changed.

use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use tokio::sync::Mutex;
use tokio::time::Instant;

use super::DashboardError;
use super::snapshot::Snapshot;
use crate::service::AppState;

/// How old a shared snapshot may be before it is built again: four a second at most.
pub const MIN_INTERVAL: Duration = Duration::from_millis(250);

pub struct Hub {
    state: AppState,
    latest: Mutex<Option<Built>>,
}

struct Built {
    at: Instant,
    picture: Picture,
}

/// One picture of the household: the JSON a viewer gets, stamped with when it was taken,
/// and what it shows without the stamp (what tells whether anything changed).
#[derive(Debug, Clone)]
pub struct Picture {
    pub json: Arc<str>,
    shows: Arc<str>,
}

impl Picture {
    /// Whether the two show the same household, whenever each was taken.
    pub fn shows_the_same_as(&self, other: &Self) -> bool {
        self.shows == other.shows
    }
}

impl Hub {
    pub fn new(state: AppState) -> Self {
        Self {
            state,
            latest: Mutex::new(None),
        }
    }

    pub fn state(&self) -> &AppState {
        &self.state
    }

    /// The household's picture, at most [`MIN_INTERVAL`] old. Viewers asking while it is
    /// being built wait for that build.
    pub async fn current(&self) -> Result<Picture, DashboardError> {
        let mut latest = self.latest.lock().await;
        if let Some(built) = latest.as_ref()
            && built.at.elapsed() < MIN_INTERVAL
        {
            return Ok(built.picture.clone());
        }
        let mut snapshot = Snapshot::read(&self.state).await?;
        let shows: Arc<str> = serde_json::to_string(&snapshot)?.into();
        snapshot.taken_at = Some(Utc::now());
        let picture = Picture {
            json: serde_json::to_string(&snapshot)?.into(),
            shows,
        };
        *latest = Some(Built {
            at: Instant::now(),
            picture: picture.clone(),
        });
        Ok(picture)
    }
}
