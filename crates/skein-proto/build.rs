//! Compiles `proto/` with protox (a protobuf compiler in Rust, so no `protoc` is needed) and
//! generates the tonic clients and servers.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Read when the script runs, not baked in when it is compiled: checkouts that share a
    // target directory (as `.ci/run`'s does) share this script's binary too.
    let root = format!("{}/../../proto", std::env::var("CARGO_MANIFEST_DIR")?);
    let files = [
        format!("{root}/skein/controller/v1/controller.proto"),
        format!("{root}/skein/v1/gateway.proto"),
    ];
    let descriptors = protox::compile(&files, [&root])?;
    // The gateway serves reflection from the encoded descriptors.
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR")?);
    std::fs::write(
        out.join("skein_descriptors.bin"),
        prost::Message::encode_to_vec(&descriptors),
    )?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_fds(descriptors)?;
    println!("cargo:rerun-if-changed={root}");
    for file in &files {
        println!("cargo:rerun-if-changed={file}");
    }
    Ok(())
}
