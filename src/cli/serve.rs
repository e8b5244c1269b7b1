//! `qwen35 serve`: the OpenAI-compatible server (see `qwen35::serve`).

use super::{load, load_chat_template, prompt_cache_file, EngineArgs};
use anyhow::Context;
use clap::Args;
use qwen35::serve::{serve, ServerOptions};
use std::path::PathBuf;

#[derive(Args)]
pub struct ServeArgs {
    #[command(flatten)]
    engine: EngineArgs,
    /// Address to listen on (only this machine by default).
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    /// Port to listen on; 0 picks a free one (the address is printed on stderr).
    #[arg(long, default_value_t = 8080)]
    port: u16,
    /// Memory for model states kept between requests, in MiB (0: none).
    #[arg(long, default_value_t = 1024)]
    cache_mb: usize,
    /// Require `Authorization: Bearer KEY` on /v1/ routes.
    #[arg(long)]
    api_key: Option<String>,
    /// A state file: read into the cache at the start (refused if it was saved for another
    /// model, or is truncated or corrupted), the state used last written to it at the end.
    #[arg(long)]
    prompt_cache: Option<PathBuf>,
}

pub fn run(args: ServeArgs) -> anyhow::Result<()> {
    let (tokenizer, engine) = load(&args.engine)?;
    let template = load_chat_template(args.engine.model())?;
    let prompt_cache = prompt_cache_file(args.prompt_cache.as_ref(), args.engine.model())?;
    let model_name = args
        .engine
        .model()
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "qwen35".into());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async move {
        let address = format!("{}:{}", args.host, args.port);
        let listener = tokio::net::TcpListener::bind(&address)
            .await
            .with_context(|| format!("listening on {address}"))?;
        let bound = listener.local_addr()?;
        eprintln!("serving {model_name} on http://{bound}");
        let options = ServerOptions {
            model_name,
            api_key: args.api_key,
            cache_bytes: args.cache_mb.saturating_mul(1 << 20),
            prompt_cache,
        };
        serve(
            listener,
            engine,
            tokenizer,
            template,
            options,
            stop_signal(),
        )
        .await
        .context("serving")?;
        eprintln!("stopped");
        Ok(())
    })
}

/// Ctrl-C or SIGTERM.
async fn stop_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {}
        _ = terminate => {}
    }
    eprintln!("stopping");
}
