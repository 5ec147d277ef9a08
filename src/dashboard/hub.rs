//! One snapshot shared by every viewer: built at most every [`MIN_INTERVAL`], whoever
//! asks, and only while someone asks (nothing runs when no page is open). Each viewer's
//! stream looks every [`MIN_INTERVAL`] and sends the picture only when it changed.

use std::sync::Arc;
use std::time::Duration;

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
    json: Arc<str>,
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

    /// The household as JSON, at most [`MIN_INTERVAL`] old. Viewers asking while it is
    /// being built wait for that build.
    pub async fn current(&self) -> Result<Arc<str>, DashboardError> {
        let mut latest = self.latest.lock().await;
        if let Some(built) = latest.as_ref()
            && built.at.elapsed() < MIN_INTERVAL
        {
            return Ok(built.json.clone());
        }
        let snapshot = Snapshot::read(&self.state).await?;
        let json: Arc<str> = serde_json::to_string(&snapshot)?.into();
        *latest = Some(Built {
            at: Instant::now(),
            json: json.clone(),
        });
        Ok(json)
    }
}
