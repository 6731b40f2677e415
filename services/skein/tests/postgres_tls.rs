//! The catalog over TLS to PostgreSQL: a real server that takes TCP logins only over TLS
//! (`hostssl`), its certificate signed by an authority of the test's. `skein migrate`
//! (the catalog's own connection, as the control plane makes it) connects with
//! `sslmode=verify-full` and the authority as `sslrootcert`; it is refused without TLS,
//! and `verify-full` refuses a server whose certificate another authority signed.

#![allow(clippy::unwrap_used)]

mod common;

use std::process::Command;

fn migrate(url: &str) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_skein"))
        .args(["migrate", "--database-url", url])
        .env_remove("SKEIN_DATABASE_URL")
        .output()
        .unwrap()
}

#[test]
fn the_catalog_connects_over_verified_tls_and_never_without_it() {
    let dir = tempfile::tempdir().unwrap();
    common::tls::certificates(dir.path(), "pg");
    common::tls::certificates(dir.path(), "stranger");
    let postgres =
        skein_testkit::Postgres::start_tls(&dir.path().join("pg.pem"), &dir.path().join("pg.key"))
            .unwrap();
    let url = postgres.database("catalog").unwrap();
    let authority = dir.path().join("pg-ca.pem");

    let verified = migrate(&format!(
        "{url}?sslmode=verify-full&sslrootcert={}",
        authority.display()
    ));
    assert!(verified.status.success(), "{verified:?}");
    assert!(
        String::from_utf8_lossy(&verified.stdout).contains("catalog is up to date"),
        "{verified:?}"
    );
    // The schema is there: a second run has nothing to apply and says so the same way.
    let again = migrate(&format!(
        "{url}?sslmode=verify-ca&sslrootcert={}",
        authority.display()
    ));
    assert!(again.status.success(), "{again:?}");

    // Without TLS the server refuses the login.
    let plain = migrate(&format!("{url}?sslmode=disable"));
    assert!(!plain.status.success(), "{plain:?}");
    assert!(
        String::from_utf8_lossy(&plain.stderr).contains("failed to connect"),
        "{plain:?}"
    );
    // verify-full with an authority that did not sign the server's certificate.
    let stranger = migrate(&format!(
        "{url}?sslmode=verify-full&sslrootcert={}",
        dir.path().join("stranger-ca.pem").display()
    ));
    assert!(!stranger.status.success(), "{stranger:?}");
    let said = String::from_utf8_lossy(&stranger.stderr).to_lowercase();
    assert!(said.contains("certificate"), "{stranger:?}");
}
