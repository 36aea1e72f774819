//! `--redis-url` in every form `ConnectionConfig::from_url` reads: the help lists them, a bad
//! one is refused in one line that names the problem and not the password, and a TLS URL with
//! a private CA in its query works against a real `redis-server --tls-port` (port 6510,
//! certificates made with `openssl` in the test; skipped without `redis-server` or `openssl`).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const GUARD: Duration = Duration::from_secs(20);

/// Exit code, stdout and stderr of one run of the binary.
fn bullmq(redis: &str, args: &[&str]) -> (Option<i32>, String, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_bullmq"))
        .args(args)
        .env("REDIS_URL", redis)
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .output()
        .expect("the bullmq binary runs");
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn the_connection_help_page_lists_every_url_form() {
    // One page (`bullmq help connection`); `--help` names it in one line.
    let (code, stdout, _) = bullmq("redis://127.0.0.1:6379", &["help", "connection"]);
    assert_eq!(code, Some(0));
    for form in [
        "redis://",
        "rediss://",
        "redis-cluster://",
        "rediss-cluster://",
        "redis-sentinel://",
        "rediss-sentinel://",
        "sentinelServiceName=",
        "node=",
        "tls_ca=",
        "tls_cert=",
        "tls_key=",
        "tls_server_name=",
        "tls_danger_accept_invalid_certs=true",
        "valkey",
    ] {
        assert!(
            stdout.contains(form),
            "help connection lacks {form}:\n{stdout}"
        );
    }
}

#[test]
fn bad_urls_are_refused_in_one_line_without_the_password() {
    let cases = [
        (
            "redis://u:hunter2@127.0.0.1:1?node=127.0.0.1:2",
            "redis-cluster://",
        ),
        (
            "redis-sentinel://u:hunter2@127.0.0.1:1?sentinelPassword=hunter2",
            "sentinel service name",
        ),
        (
            "rediss://u:hunter2@127.0.0.1:1?tls_ca=/nonexistent/ca.pem",
            "/nonexistent/ca.pem",
        ),
        (
            "redis://u:hunter2@127.0.0.1:1?tls_ca=/ca.pem",
            "not a TLS one",
        ),
        (
            "rediss://u:hunter2@127.0.0.1:1?tls_ca_file=/ca.pem",
            "tls_ca_file",
        ),
    ];
    for (url, mentions) in cases {
        let started = Instant::now();
        let (code, stdout, stderr) = bullmq(url, &["stats", "q"]);
        assert_ne!(code, Some(0), "{url}: {stderr}");
        let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
        assert_eq!(lines.len(), 1, "{url}: one line expected, got {lines:?}");
        assert!(
            lines[0].to_lowercase().contains(&mentions.to_lowercase()),
            "{url}: {} lacks {mentions:?}",
            lines[0]
        );
        assert!(
            !stderr.contains("hunter2"),
            "{url}: password shown: {stderr}"
        );
        assert!(stdout.is_empty(), "{url}: {stdout}");
        assert!(
            started.elapsed() < GUARD,
            "{url}: took {:?}",
            started.elapsed()
        );
    }
}

/// A CA and a server certificate for 127.0.0.1 in a fresh directory.
fn make_pki(dir: &Path) -> bool {
    let run = |args: &[&str]| {
        Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    std::fs::write(
        dir.join("server.ext"),
        "basicConstraints=CA:FALSE\nsubjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n",
    )
    .expect("write the extensions");
    run(&[
        &["req", "-x509"][..],
        &ec,
        &[
            "-days",
            "2",
            "-subj",
            "/CN=cli test CA",
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
            "-keyout",
            "ca.key",
            "-out",
            "ca.pem",
        ],
    ]
    .concat())
        && run(&[
            &["req"][..],
            &ec,
            &[
                "-subj",
                "/CN=cli test server",
                "-keyout",
                "server.key",
                "-out",
                "server.csr",
            ],
        ]
        .concat())
        && run(&[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-days",
            "2",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-extfile",
            "server.ext",
            "-out",
            "server.pem",
        ])
}

/// The TLS server, killed by its handle (its PID) when dropped.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn stats_runs_over_tls_with_the_ca_in_the_url() {
    let dir: PathBuf = std::env::temp_dir().join(format!("bullmq-cli-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    if !make_pki(&dir) {
        eprintln!("SKIPPING stats_runs_over_tls_with_the_ca_in_the_url: no working openssl");
        let _ = std::fs::remove_dir_all(&dir);
        return;
    }
    let port = 6510;
    let spawned = Command::new("redis-server")
        .args([
            "--port",
            "0",
            "--tls-port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
        ])
        .args([
            "--save",
            "",
            "--appendonly",
            "no",
            "--tls-auth-clients",
            "no",
        ])
        .arg("--tls-cert-file")
        .arg(dir.join("server.pem"))
        .arg("--tls-key-file")
        .arg(dir.join("server.key"))
        .arg("--dir")
        .arg(&dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
    let Ok(child) = spawned else {
        eprintln!("SKIPPING stats_runs_over_tls_with_the_ca_in_the_url: no redis-server");
        let _ = std::fs::remove_dir_all(&dir);
        return;
    };
    let server = Server(child);
    let started = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(started.elapsed() < GUARD, "the TLS server never listened");
        std::thread::sleep(Duration::from_millis(50));
    }

    let url = format!(
        "rediss://127.0.0.1:{port}?tls_ca={}",
        dir.join("ca.pem").display()
    );
    // A queue exists once it has a key: add one job over TLS, then read it back.
    let (code, _, stderr) = bullmq(&url, &["add", "cli-tls", "job"]);
    assert_eq!(code, Some(0), "stderr: {stderr}");
    let (code, stdout, stderr) = bullmq(&url, &["--json", "stats", "cli-tls"]);
    assert_eq!(code, Some(0), "stderr: {stderr}");
    assert!(stdout.contains("\"waiting\": 1"), "{stdout}");
    assert!(stdout.contains("cli-tls"), "{stdout}");

    // Without the CA the system roots do not know the server: refused, saying what to set.
    let (code, _, stderr) = bullmq(&format!("rediss://127.0.0.1:{port}"), &["stats", "q"]);
    assert_ne!(code, Some(0));
    assert!(stderr.contains("tls_ca"), "{stderr}");
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}
