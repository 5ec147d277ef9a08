//! Which workers exist and what they serve: the registry in embedded mode, worker
//! heartbeats in cluster mode.

use crate::backend::Registry;
use crate::backend::registry::WorkerStatus;
use crate::domain::{ModelName, WorkerName};
use crate::routing::Catalog;

pub trait Directory: Send + Sync + 'static {
    /// What every worker serves right now.
    fn catalog(&self) -> Catalog;

    /// The worker expected to take a task for `model` now.
    fn best_worker_for(&self, model: &ModelName) -> Option<WorkerName>;

    fn statuses(&self) -> Vec<WorkerStatus>;

    /// Whether any worker can run anything.
    fn any_healthy(&self) -> bool;

    /// How many healthy workers, other than those in `except`, serve `model`.
    fn others_serving(&self, model: &ModelName, except: &[WorkerName]) -> usize;
}

impl Directory for Registry {
    fn catalog(&self) -> Catalog {
        Registry::catalog(self)
    }

    fn best_worker_for(&self, model: &ModelName) -> Option<WorkerName> {
        Registry::best_worker_for(self, model)
    }

    fn statuses(&self) -> Vec<WorkerStatus> {
        Registry::statuses(self)
    }

    fn any_healthy(&self) -> bool {
        Registry::any_healthy(self)
    }

    fn others_serving(&self, model: &ModelName, except: &[WorkerName]) -> usize {
        self.handles()
            .iter()
            .filter(|h| h.is_healthy() && h.serves(model) && !except.contains(h.name()))
            .count()
    }
}
