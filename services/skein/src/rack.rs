//! `skein rack-from-node`: a broker pod's `broker.rack`, read from a label (the zone) of
//! the Kubernetes node it runs on, through the API server with the pod's service account,
//! and written as a broker configuration file (`[broker] rack = "..."`) for `--config`.
//! The chart runs it as an init container; the node's labels are not in the downward API.

use std::path::{Path, PathBuf};

use anyhow::Context;

/// Where a pod finds its service account.
const SERVICE_ACCOUNT: &str = "/var/run/secrets/kubernetes.io/serviceaccount";
/// The most of a node object read.
const MAX_BYTES: usize = 1 << 20;

#[derive(Debug, clap::Args)]
pub(crate) struct RackArgs {
    /// The node the pod runs on (the chart passes spec.nodeName)
    #[arg(long, env = "NODE_NAME")]
    node: String,
    /// The node label whose value is the rack
    #[arg(
        long,
        env = "SKEIN_RACK_LABEL",
        default_value = "topology.kubernetes.io/zone"
    )]
    label: String,
    /// The broker configuration file to write
    #[arg(long, env = "SKEIN_RACK_OUT")]
    out: PathBuf,
    /// The API server (default: https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT)
    #[arg(long, env = "SKEIN_KUBERNETES_API")]
    api: Option<String>,
    /// The service account's directory (token and ca.crt)
    #[arg(long, env = "SKEIN_KUBERNETES_SERVICE_ACCOUNT", default_value = SERVICE_ACCOUNT)]
    service_account: PathBuf,
}

pub(crate) fn run(args: RackArgs) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("failed to start the async runtime")?;
    let rack = runtime.block_on(node_label(&args))?;
    let text = match &rack {
        Some(rack) => format!("[broker]\nrack = {}\n", toml::Value::String(rack.clone())),
        None => String::new(),
    };
    std::fs::write(&args.out, text)
        .with_context(|| format!("failed to write {}", args.out.display()))?;
    match rack {
        Some(rack) => println!(
            "broker.rack = {rack:?} (label {} of node {})",
            args.label, args.node
        ),
        None => println!(
            "node {} has no label {}: no broker.rack",
            args.node, args.label
        ),
    }
    Ok(())
}

async fn node_label(args: &RackArgs) -> anyhow::Result<Option<String>> {
    let api = match &args.api {
        Some(api) => api.clone(),
        None => {
            let host = std::env::var("KUBERNETES_SERVICE_HOST")
                .context("KUBERNETES_SERVICE_HOST is not set: not in a pod? (give --api)")?;
            let port = std::env::var("KUBERNETES_SERVICE_PORT").unwrap_or_else(|_| "443".into());
            format!("https://{host}:{port}")
        }
    };
    anyhow::ensure!(
        !args.node.is_empty() && !args.node.contains('/'),
        "{:?} is not a node name",
        args.node
    );
    let token = read(&args.service_account.join("token"))?;
    let ca = read(&args.service_account.join("ca.crt"))?;
    let client = reqwest::Client::builder()
        .use_rustls_tls()
        .tls_built_in_root_certs(false)
        .add_root_certificate(
            reqwest::Certificate::from_pem(ca.as_bytes())
                .context("ca.crt is not a PEM certificate")?,
        )
        .timeout(std::time::Duration::from_secs(10))
        .build()
        .context("failed to build the HTTPS client")?;
    let url = format!("{}/api/v1/nodes/{}", api.trim_end_matches('/'), args.node);
    let mut response = client
        .get(&url)
        .bearer_auth(token.trim())
        .send()
        .await
        .and_then(reqwest::Response::error_for_status)
        .with_context(|| format!("failed to read node {} from {api}", args.node))?;
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.context("failed to read the node")? {
        anyhow::ensure!(
            body.len() + chunk.len() <= MAX_BYTES,
            "the node object is over {MAX_BYTES} bytes"
        );
        body.extend_from_slice(&chunk);
    }
    let node: serde_json::Value =
        serde_json::from_slice(&body).context("the node object is not JSON")?;
    let rack = node
        .pointer("/metadata/labels")
        .and_then(|labels| labels.get(&args.label))
        .and_then(serde_json::Value::as_str)
        .filter(|rack| !rack.is_empty())
        .map(str::to_owned);
    if let Some(rack) = &rack {
        anyhow::ensure!(rack.len() <= 255, "the rack label is over 255 characters");
    }
    Ok(rack)
}

fn read(path: &Path) -> anyhow::Result<String> {
    std::fs::read_to_string(path).with_context(|| format!("failed to read {}", path.display()))
}
