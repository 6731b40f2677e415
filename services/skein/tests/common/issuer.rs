//! A token issuer for tests: the test key pairs of `crates/skein-token/tests/keys` and
//! their key set served over HTTP.

/// Serves the test key set (`crates/skein-token/tests/keys/jwks.json`: kids rsa-jwk, ec-jwk,
/// ed-jwk) over HTTP, as an issuer would; answers its URL.
pub fn serve_jwks() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/jwks.json", listener.local_addr().unwrap());
    let body = std::fs::read_to_string(test_key("jwks.json")).unwrap();
    std::thread::spawn(move || {
        use std::io::{Read, Write};
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut buf = [0u8; 4096];
            let _ = stream.read(&mut buf);
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
                 Connection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    url
}

/// The path of a test key file.
pub fn test_key(name: &str) -> String {
    format!(
        "{}/../../crates/skein-token/tests/keys/{name}",
        env!("CARGO_MANIFEST_DIR")
    )
}
