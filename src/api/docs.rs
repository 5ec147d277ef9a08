//! The household's documents over HTTP, the same as `coordinator docs list|ingest|forget`:
//!
//! - `GET /docs[?collection=]`: the collections (documents and chunks each) and the
//!   documents, as `docs list` prints them. Any valid key.
//! - `POST /docs`, JSON `{"collection"?, "path", "content"}`: one Markdown or text file
//!   (`path` is its name, e.g. `home/cat.md`: the extension decides its kind and citations
//!   show it), ingested like a file: the same text again changes nothing, new text replaces
//!   it whole. 201 when added, 200 when replaced or unchanged. An admin key.
//! - `DELETE /docs/{collection}[?path=]`: one document (its listed `path`, or an uploaded
//!   file's name) or the whole collection. An admin key.
//!
//! Documents are the household's, not one person's: every key may search and list them
//! (the RAG lane reads them for anyone), only an admin changes them. Without keys the one
//! person is an admin. Nothing here is on a chat's path; the RAG lane's retriever notices
//! the change by the store's generation.

use std::collections::BTreeMap;

use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::{Extension, Json};
use serde::{Deserialize, Serialize};

use super::error::ApiError;
use super::http::ApiJson;
use crate::docs::ingest::{Outcome, UploadReport, ingest_upload, resolve_key, upload_source};
use crate::docs::lane::RagContext;
use crate::docs::store::{DocStore, DocumentInfo};
use crate::docs::{Collection, DocsError};
use crate::people::Caller;
use crate::service::AppState;
use crate::store::StoreError;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    collection: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ForgetQuery {
    path: Option<String>,
}

/// The body of `POST /docs`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UploadBody {
    /// `[docs] default_collection` when absent.
    collection: Option<String>,
    path: String,
    content: String,
}

/// One collection in the listing.
#[derive(Debug, Serialize, PartialEq)]
pub struct CollectionSummary {
    name: Collection,
    /// The model that asks only this collection.
    model: String,
    documents: usize,
    chunks: u64,
}

#[derive(Debug, Serialize)]
pub struct Listing {
    collections: Vec<CollectionSummary>,
    documents: Vec<DocumentInfo>,
}

#[derive(Debug, Serialize)]
pub struct Forgotten {
    collection: Collection,
    #[serde(skip_serializing_if = "Option::is_none")]
    path: Option<String>,
    forgotten: u64,
}

fn docs(state: &AppState) -> Result<&RagContext, ApiError> {
    state
        .rag
        .as_deref()
        .ok_or_else(|| ApiError::Unavailable("the document store is not available".to_owned()))
}

fn store(state: &AppState) -> Result<&dyn DocStore, ApiError> {
    Ok(docs(state)?.retriever.store().as_ref())
}

/// Only an admin changes the household's documents.
fn admin_only(caller: &Caller) -> Result<(), ApiError> {
    if caller.admin {
        Ok(())
    } else {
        Err(ApiError::Forbidden(
            "the documents are the household's: adding or forgetting them needs an admin key"
                .to_owned(),
        ))
    }
}

fn collection(name: &str) -> Result<Collection, ApiError> {
    Collection::parse(name).map_err(|e| docs_error(e, "collection"))
}

/// A documents error as the client sees it; `param` names the field a bad name came in.
fn docs_error(e: DocsError, param: &str) -> ApiError {
    match e {
        DocsError::BadCollection { .. } => ApiError::BadRequest {
            message: e.to_string(),
            param: Some(param.to_owned()),
        },
        DocsError::BadUpload { field, .. } => ApiError::BadRequest {
            message: e.to_string(),
            param: Some(field.to_owned()),
        },
        DocsError::UnsupportedKind { .. } | DocsError::NotText { .. } => ApiError::BadRequest {
            message: e.to_string(),
            param: Some("path".to_owned()),
        },
        DocsError::Missing { .. } => ApiError::NotFound(e.to_string()),
        DocsError::Read { .. } => ApiError::Internal(e.to_string()),
        DocsError::Store(s) => store_error(s),
    }
}

fn store_error(e: StoreError) -> ApiError {
    match e {
        StoreError::Unavailable(_) | StoreError::WriterStopped => {
            tracing::warn!(error = %e, "the document store cannot write");
            ApiError::StoreUnavailable {
                lang: crate::lang::Lang::En,
            }
        }
        other => ApiError::Internal(format!("document store: {other}")),
    }
}

/// `GET /docs`.
pub async fn list(
    State(state): State<AppState>,
    q: Result<Query<ListQuery>, QueryRejection>,
) -> Result<Json<Listing>, ApiError> {
    let Query(q) = q?;
    let store = store(&state)?;
    let wanted = q.collection.as_deref().map(collection).transpose()?;
    let documents = store
        .documents(wanted.as_ref())
        .await
        .map_err(store_error)?;
    Ok(Json(Listing {
        collections: summaries(&documents),
        documents,
    }))
}

/// Documents and chunks per collection, by name.
fn summaries(documents: &[DocumentInfo]) -> Vec<CollectionSummary> {
    let mut by_name: BTreeMap<&Collection, (usize, u64)> = BTreeMap::new();
    for d in documents {
        let entry = by_name.entry(&d.collection).or_default();
        entry.0 += 1;
        entry.1 += u64::from(d.chunks);
    }
    by_name
        .into_iter()
        .map(|(name, (documents, chunks))| CollectionSummary {
            model: crate::docs::RagModel::name_of(name),
            name: name.clone(),
            documents,
            chunks,
        })
        .collect()
}

/// `POST /docs`.
pub async fn upload(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    body: Result<ApiJson<UploadBody>, ApiError>,
) -> Result<(StatusCode, Json<UploadReport>), ApiError> {
    // Who asks comes first: a non-admin hears 403 whatever the body holds.
    admin_only(&caller)?;
    let ApiJson(body) = body?;
    let ctx = docs(&state)?;
    let collection = collection(
        body.collection
            .as_deref()
            .unwrap_or(&ctx.config.default_collection),
    )?;
    let source = upload_source(&body.path, body.content).map_err(|e| docs_error(e, "path"))?;
    let report = ingest_upload(
        ctx.retriever.store().as_ref(),
        &ctx.config,
        &collection,
        &source,
    )
    .await
    .map_err(|e| docs_error(e, "collection"))?;
    tracing::info!(
        collection = %report.collection,
        path = %report.path,
        outcome = ?report.outcome,
        chunks = report.chunks,
        person = %caller.person,
        "document uploaded"
    );
    let status = match report.outcome {
        Outcome::Added => StatusCode::CREATED,
        Outcome::Replaced | Outcome::Unchanged => StatusCode::OK,
    };
    Ok((status, Json(report)))
}

/// `DELETE /docs/{collection}`.
pub async fn forget(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(name): Path<String>,
    q: Result<Query<ForgetQuery>, QueryRejection>,
) -> Result<Json<Forgotten>, ApiError> {
    admin_only(&caller)?;
    let Query(q) = q?;
    let store = store(&state)?;
    let collection = collection(&name)?;
    let key = match q.path.as_deref() {
        None => None,
        Some(given) => {
            let listed = store
                .documents(Some(&collection))
                .await
                .map_err(store_error)?;
            let key = resolve_key(listed.iter().map(|d| d.path.as_str()), given);
            Some(key.ok_or_else(|| {
                ApiError::NotFound(format!("{collection} holds no document {given:?}"))
            })?)
        }
    };
    let forgotten = store
        .forget(&collection, key.as_deref())
        .await
        .map_err(store_error)?;
    if forgotten == 0 {
        return Err(ApiError::NotFound(format!(
            "the collection {collection} holds no documents"
        )));
    }
    tracing::info!(
        collection = %collection,
        path = key.as_deref().unwrap_or("*"),
        forgotten,
        person = %caller.person,
        "documents forgotten"
    );
    Ok(Json(Forgotten {
        collection,
        path: key,
        forgotten,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summaries_count_documents_and_chunks_per_collection() {
        let doc = |c: &str, chunks: u32| DocumentInfo {
            collection: Collection::parse(c).unwrap(),
            path: format!("upload:{c}-{chunks}.md"),
            display: String::new(),
            title: String::new(),
            metadata: BTreeMap::new(),
            hash: String::new(),
            chunks,
            ingested_at: chrono::Utc::now(),
        };
        let s = summaries(&[doc("notes", 3), doc("manuals", 1), doc("notes", 4)]);
        let got: Vec<(&str, &str, usize, u64)> = s
            .iter()
            .map(|c| (c.name.as_str(), c.model.as_str(), c.documents, c.chunks))
            .collect();
        assert_eq!(
            got,
            vec![
                ("manuals", "rag:manuals", 1, 1),
                ("notes", "rag:notes", 2, 7)
            ]
        );
    }

    #[test]
    fn only_an_admin_changes_documents() {
        assert!(admin_only(&Caller::household()).is_ok());
        let bob = Caller {
            person: crate::domain::Person::parse("bob").unwrap(),
            admin: false,
        };
        assert_eq!(
            admin_only(&bob).unwrap_err().status(),
            StatusCode::FORBIDDEN
        );
    }
}
