//! Log events captured in a test, each with the fields of the spans it was written in: to
//! check that what is logged for a task carries the task's span.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Subscriber};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

/// Field names and values, as they were written.
#[derive(Debug, Clone, Default)]
struct Fields(HashMap<String, String>);

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
}

/// Makes `subscriber` the calling thread's until the guard is dropped, in a test binary
/// whose other tests run on other threads with no subscriber or with their own.
///
/// Whether a span or event is built at all is cached per call site for the whole process.
/// While only one dispatcher is registered, tracing-core works that cache out from
/// whichever thread first reaches the call site: a test running alongside, with no
/// subscriber, would switch the call site off for this thread too, and a task's span would
/// silently be missing from what this one sees. A second dispatcher that lives as long as
/// the process makes every call site ask each thread's own subscriber instead, and the
/// rebuild re-asks the call sites reached before this one was installed.
pub fn scoped_default<S>(subscriber: S) -> tracing::subscriber::DefaultGuard
where
    S: Subscriber + Send + Sync + 'static,
{
    static BESIDE: std::sync::OnceLock<tracing::Dispatch> = std::sync::OnceLock::new();
    BESIDE.get_or_init(|| tracing::Dispatch::new(tracing::subscriber::NoSubscriber::new()));
    let guard = tracing::subscriber::set_default(subscriber);
    tracing::callsite::rebuild_interest_cache();
    guard
}

/// One log event: its own fields (the message among them) and those of its spans.
#[derive(Debug, Clone)]
pub struct Captured {
    pub event: HashMap<String, String>,
    pub spans: HashMap<String, String>,
}

impl Captured {
    pub fn message(&self) -> &str {
        self.event.get("message").map_or("", String::as_str)
    }
}

/// A layer that keeps every event with the fields of the spans it is in, installed for the
/// calling thread by [`Capture::set_default`].
#[derive(Clone, Default)]
pub struct Capture(Arc<Mutex<Vec<Captured>>>);

impl Capture {
    /// Makes this capture the calling thread's subscriber until the guard is dropped (see
    /// [`scoped_default`]).
    pub fn set_default(&self) -> tracing::subscriber::DefaultGuard {
        scoped_default(tracing_subscriber::registry().with(self.clone()))
    }

    /// Every event captured so far, oldest first.
    pub fn events(&self) -> Vec<Captured> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Capture {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut fields = Fields::default();
        attrs.record(&mut fields);
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(fields);
        }
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(id)
            && let Some(fields) = span.extensions_mut().get_mut::<Fields>()
        {
            values.record(fields);
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let mut own = Fields::default();
        event.record(&mut own);
        let mut spans = Fields::default();
        for span in ctx.event_scope(event).into_iter().flatten() {
            if let Some(fields) = span.extensions().get::<Fields>() {
                spans.0.extend(fields.0.clone());
            }
        }
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Captured {
                event: own.0,
                spans: spans.0,
            });
    }
}
