//! Certificates for TLS listeners, made with `openssl` in a test's directory.

use std::process::Command;

/// Runs `openssl` in `dir`.
pub fn openssl(dir: &std::path::Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// An EC P-256 key: openssl's `-newkey` arguments.
pub const EC_KEY: [&str; 5] = [
    "-newkey",
    "ec",
    "-pkeyopt",
    "ec_paramgen_curve:prime256v1",
    "-nodes",
];

/// A key and a certificate for `subject`, signed by the authority `<authority>-ca` in `dir`
/// with the openssl extension line `extension`, as `<name>.pem` and `<name>.key`.
pub fn signed(dir: &std::path::Path, authority: &str, name: &str, subject: &str, extension: &str) {
    let (cert, key, csr) = (
        format!("{name}.pem"),
        format!("{name}.key"),
        format!("{name}.csr"),
    );
    let request = ["req", "-keyout", &key, "-out", &csr, "-subj", subject];
    openssl(dir, &[&request[..1], &EC_KEY[..], &request[1..]].concat());
    let extfile = format!("{name}.ext");
    std::fs::write(dir.join(&extfile), format!("{extension}\n")).unwrap();
    let (ca, ca_key) = (format!("{authority}-ca.pem"), format!("{authority}-ca.key"));
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            &csr,
            "-CA",
            &ca,
            "-CAkey",
            &ca_key,
            "-CAcreateserial",
            "-out",
            &cert,
            "-days",
            "2",
            "-extfile",
            &extfile,
        ],
    );
}

/// A certificate authority and a server certificate for 127.0.0.1 it signed, as PEM files
/// in `dir` named `<name>-ca.pem`, `<name>.pem` and `<name>.key`.
pub fn certificates(dir: &std::path::Path, name: &str) {
    let (ca, ca_key, subject) = (
        format!("{name}-ca.pem"),
        format!("{name}-ca.key"),
        format!("/CN={name}-ca"),
    );
    let authority = [
        "-keyout", &ca_key, "-out", &ca, "-days", "2", "-subj", &subject,
    ];
    openssl(
        dir,
        &[&["req", "-x509"][..], &EC_KEY[..], &authority[..]].concat(),
    );
    signed(
        dir,
        name,
        name,
        "/CN=127.0.0.1",
        "subjectAltName=IP:127.0.0.1",
    );
}
