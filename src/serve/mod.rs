//! `qwen35 serve`: an OpenAI-compatible HTTP server (axum on tokio). Requests queue and are
//! served one at a time by the model's thread ([`worker`]); the state after message boundaries,
//! prompts and replies is kept in a [`PrefixCache`], so a conversation's next turn prefills only
//! what is new.

mod api;
mod error;
mod generate;
mod routes;
mod text;
mod worker;

pub use error::ApiError;
pub use routes::MAX_BODY_BYTES;

use crate::chat::ChatTemplate;
use crate::model::Engine;
use crate::prefix_cache::PrefixCache;
use crate::state_file::PromptCacheFile;
use crate::tokenizer::Tokenizer;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use worker::{Job, Worker};

/// What the request handlers share.
pub struct Shared {
    template: ChatTemplate,
    tokenizer: Arc<Tokenizer>,
    model_name: String,
    context_len: usize,
    api_key: Option<String>,
    created: u64,
    jobs: mpsc::Sender<Job>,
    next_id: AtomicU64,
    planted: Arc<PlantedPanic>,
}

/// Where [`PlantedPanic`] may fire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PanicSite {
    /// The chat completions handler, on the HTTP side.
    Route,
    /// The model's thread, inside the generation.
    Model,
}

/// For tests only: `QWEN35_TEST_PANIC=route` or `=model`, read once when the server starts,
/// makes the first chat request through that place panic, so the tests can watch a panic
/// answered with a 500 and the server serving on. Unset (as outside tests), nothing fires.
struct PlantedPanic {
    site: Option<PanicSite>,
    armed: AtomicBool,
}

impl PlantedPanic {
    fn from_env() -> PlantedPanic {
        let site = match std::env::var("QWEN35_TEST_PANIC").as_deref() {
            Ok("route") => Some(PanicSite::Route),
            Ok("model") => Some(PanicSite::Model),
            Ok(other) => {
                log::warn!("QWEN35_TEST_PANIC={other:?} ignored: it takes route or model");
                None
            }
            Err(_) => None,
        };
        PlantedPanic {
            site,
            armed: AtomicBool::new(true),
        }
    }

    fn fire(&self, site: PanicSite) {
        if self.site == Some(site) && self.armed.swap(false, Ordering::SeqCst) {
            panic!("the panic QWEN35_TEST_PANIC planted ({site:?})");
        }
    }
}

pub struct ServerOptions {
    /// The id `/v1/models` lists.
    pub model_name: String,
    pub api_key: Option<String>,
    /// Memory for cached states, in bytes.
    pub cache_bytes: usize,
    /// `--prompt-cache`: a state read at the start and the last one used written at the end.
    pub prompt_cache: Option<PromptCacheFile>,
}

/// Serves on `listener` until `shutdown` resolves: then running generations stop at their next
/// token, their replies end, and the model's thread is joined.
pub async fn serve(
    listener: tokio::net::TcpListener,
    engine: Box<dyn Engine>,
    tokenizer: Tokenizer,
    template: ChatTemplate,
    options: ServerOptions,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let tokenizer = Arc::new(tokenizer);
    let stopping = Arc::new(AtomicBool::new(false));
    let context_len = engine.context_len();
    let (jobs, queue) = mpsc::channel();
    let planted = Arc::new(PlantedPanic::from_env());
    let mut cache = PrefixCache::new(options.cache_bytes);
    if let Some(file) = &options.prompt_cache {
        if let Some(count) = file.load_into(&mut cache).map_err(std::io::Error::other)? {
            log::info!("{count} tokens of state read from {}", file.path.display());
        }
    }
    let worker = Worker {
        engine,
        tokenizer: Arc::clone(&tokenizer),
        cache,
        stopping: Arc::clone(&stopping),
        prompt_cache: options.prompt_cache,
        planted: Arc::clone(&planted),
    };
    let model_thread = std::thread::Builder::new()
        .name("model".into())
        .spawn(move || worker.run(queue))?;
    let shared = Arc::new(Shared {
        template,
        tokenizer,
        model_name: options.model_name,
        context_len,
        api_key: options.api_key,
        created: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0),
        jobs,
        next_id: AtomicU64::new(1),
        planted,
    });
    let app = routes::router(shared);
    let served = axum::serve(listener, app)
        .with_graceful_shutdown(async move {
            shutdown.await;
            stopping.store(true, Ordering::SeqCst);
        })
        .await;
    // The router (and with it the job sender) is gone: the model's thread ends its queue.
    tokio::task::spawn_blocking(move || model_thread.join())
        .await
        .ok();
    served
}
