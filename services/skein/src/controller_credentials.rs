//! Credentials for the controller: `skein controller-token` mints one for a broker or a
//! gateway from the controller's secret, and the services read theirs from a file.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use skein_control_plane::{credentials, NewCredential, Role};
use skein_proto::replicas::Credential;

/// The shortest controller secret accepted, in bytes.
const MIN_SECRET_BYTES: usize = 32;

#[derive(Debug, Args)]
pub(crate) struct ControllerTokenArgs {
    /// The file holding the controller's secret (`skein control-plane --controller-secret-file`)
    #[arg(long, env = "SKEIN_CONTROLLER_SECRET_FILE")]
    secret_file: PathBuf,
    /// The caller's role: broker or gateway
    #[arg(long, env = "SKEIN_CONTROLLER_TOKEN_ROLE")]
    role: Role,
    /// A tenant a broker serves (repeatable; `*` for every tenant)
    #[arg(
        long = "tenant",
        env = "SKEIN_CONTROLLER_TOKEN_TENANTS",
        value_delimiter = ','
    )]
    tenants: Vec<String>,
    /// Let the broker forward its Kafka clients' ACL changes (with
    /// unauthenticated_acl_changes on the broker)
    #[arg(long, env = "SKEIN_CONTROLLER_TOKEN_ACL_CHANGES")]
    acl_changes: bool,
    /// The node id of the broker the credential is for: the controller holds every call
    /// that names a node to it
    #[arg(long, env = "SKEIN_CONTROLLER_TOKEN_NODE", conflicts_with = "any_node")]
    node: Option<i32>,
    /// A broker credential for any node, held to the tenants of each node's registration
    /// instead (one credential shared by several brokers)
    #[arg(long, env = "SKEIN_CONTROLLER_TOKEN_ANY_NODE")]
    any_node: bool,
    /// A name for the credential, shown in the controller's logs
    #[arg(long, env = "SKEIN_CONTROLLER_TOKEN_NAME", default_value = "skein")]
    name: String,
    /// Days until the credential expires
    #[arg(long, env = "SKEIN_CONTROLLER_TOKEN_VALID_DAYS", default_value_t = 365)]
    valid_days: u64,
    /// Write the credential to this file (readable by its owner only) instead of printing
    /// it: an init container hands it to the pod's service this way
    #[arg(long, env = "SKEIN_CONTROLLER_TOKEN_OUT")]
    out: Option<PathBuf>,
}

/// Prints a credential.
pub(crate) fn run(args: ControllerTokenArgs) -> anyhow::Result<()> {
    let secret = read_secret(&args.secret_file)?;
    if args.role == Role::Broker && args.tenants.is_empty() {
        anyhow::bail!("a broker credential names the tenants it serves: give --tenant");
    }
    if args.role == Role::Broker && args.node.is_none() && !args.any_node {
        anyhow::bail!(
            "a broker credential names the broker's node: give --node (or --any-node for one \
             credential shared by several brokers)"
        );
    }
    if args.role == Role::Gateway
        && (!args.tenants.is_empty() || args.acl_changes || args.node.is_some() || args.any_node)
    {
        anyhow::bail!(
            "a gateway credential takes none of --tenant, --acl-changes, --node and --any-node"
        );
    }
    let token = credentials::mint(
        &secret,
        &NewCredential {
            name: args.name,
            role: args.role,
            tenants: args.tenants,
            acl_changes: args.acl_changes,
            node: args.node,
            valid_for: Duration::from_secs(args.valid_days.saturating_mul(86_400)),
        },
    )
    .context("failed to sign the credential")?;
    match &args.out {
        Some(path) => {
            use std::io::Write;
            use std::os::unix::fs::OpenOptionsExt;
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .open(path)
                .with_context(|| format!("failed to create {}", path.display()))?;
            writeln!(file, "{token}")
                .with_context(|| format!("failed to write {}", path.display()))?;
        }
        None => println!("{token}"),
    }
    Ok(())
}

/// The controller's secret from its file: at least 32 bytes once trimmed.
pub(crate) fn read_secret(path: &Path) -> anyhow::Result<Vec<u8>> {
    let secret =
        std::fs::read(path).with_context(|| format!("failed to read {}", path.display()))?;
    let secret = secret.trim_ascii().to_vec();
    if secret.len() < MIN_SECRET_BYTES {
        anyhow::bail!(
            "the controller secret in {} has {} bytes; at least {MIN_SECRET_BYTES} are needed",
            path.display(),
            secret.len()
        );
    }
    Ok(secret)
}

/// The credential a broker or gateway presents, from its file; none without a file (the
/// controller then refuses its calls, saying a credential is required).
pub(crate) fn read_credential(path: Option<&Path>) -> anyhow::Result<Credential> {
    let Some(path) = path else {
        tracing::warn!(
            "no --controller-token-file: the controller will refuse this process's calls"
        );
        return Ok(Credential::none());
    };
    let token = std::fs::read_to_string(path)
        .with_context(|| format!("failed to read {}", path.display()))?;
    Credential::bearer(&token)
        .with_context(|| format!("{} does not hold a controller credential", path.display()))
}
