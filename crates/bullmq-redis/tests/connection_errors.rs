//! Connection errors come back typed and in bounded time: a bad scheme is refused before any
//! connect, and an unreachable port, a silent server and a plain server behind `rediss://` all
//! fail within the connect timeout (each call is bounded by a generous 20 s guard, and must
//! return well before it).

use std::time::{Duration, Instant};

use bullmq_redis::{ConnectionConfig, RedisError};

const GUARD: Duration = Duration::from_secs(20);

fn redis_url() -> String {
    std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".to_owned())
}

/// A loopback port nobody listens on (bound, then released).
fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("addr").port()
}

/// Connects with `config` and returns the error and how long it took; fails the test when the
/// connect succeeds or runs into the guard.
async fn connect_error(config: &ConnectionConfig) -> (RedisError, Duration) {
    let started = Instant::now();
    match tokio::time::timeout(GUARD, config.connect(None)).await {
        Ok(Ok(_)) => panic!("connecting to {} succeeded", config.target()),
        Ok(Err(error)) => (error, started.elapsed()),
        Err(_) => panic!("connecting to {} hung for {GUARD:?}", config.target()),
    }
}

#[test]
fn unknown_schemes_are_refused_with_the_accepted_ones() {
    for url in ["http://127.0.0.1:6379", "tcp://localhost", "127.0.0.1:6379"] {
        let error = ConnectionConfig::from_url(url).unwrap_err();
        assert!(
            matches!(error, RedisError::UnsupportedScheme { .. }),
            "{url}: {error:?}"
        );
        let message = error.to_string();
        for accepted in ["redis://", "rediss://"] {
            assert!(message.contains(accepted), "{url}: {message}");
        }
    }
    let http = ConnectionConfig::from_url("http://user:secret@h:1").unwrap_err();
    assert!(http.to_string().contains("`http://`"), "{http}");
    assert!(
        !http.to_string().contains("secret"),
        "no password in {http}"
    );
}

#[test]
fn accepted_schemes_set_tls() {
    for scheme in bullmq_redis::ACCEPTED_SCHEMES {
        let url = if scheme.contains("sentinel") {
            format!("{scheme}h:1?sentinelServiceName=m")
        } else {
            format!("{scheme}h:1")
        };
        assert!(ConnectionConfig::from_url(&url).is_ok(), "{url}");
    }
    let plain = ConnectionConfig::from_url("redis://h:1/3").unwrap();
    assert!(!plain.tls);
    assert_eq!(plain.db, 3);
    assert!(ConnectionConfig::from_url("rediss://h:1").unwrap().tls);
    assert!(ConnectionConfig::from_url("valkeys://h:1").unwrap().tls);
    assert!(!ConnectionConfig::from_url("valkey://h:1").unwrap().tls);
}

#[tokio::test]
async fn an_unreachable_port_fails_fast_with_connect() {
    let config = ConnectionConfig::from_url(&format!("redis://127.0.0.1:{}", free_port())).unwrap();
    let (error, took) = connect_error(&config).await;
    assert!(matches!(error, RedisError::Connect { .. }), "{error:?}");
    assert!(took < GUARD / 2, "took {took:?}");
}

#[tokio::test]
async fn a_silent_server_fails_within_the_connect_timeout() {
    // Accepts TCP connections and never answers: only the connect timeout ends the attempt.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let accepted = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = accepted.clone();
    let holder = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            held.push(socket);
        }
    });
    let mut config = ConnectionConfig::from_url(&format!("redis://127.0.0.1:{port}")).unwrap();
    config.connect_timeout = Duration::from_secs(2);
    let (error, took) = connect_error(&config).await;
    assert!(matches!(error, RedisError::Connect { .. }), "{error:?}");
    assert!(took < GUARD / 2, "took {took:?}");
    // The failed client is shut down: it does not keep reconnecting in the background.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let before = accepted.load(std::sync::atomic::Ordering::SeqCst);
    tokio::time::sleep(Duration::from_secs(4)).await;
    let after = accepted.load(std::sync::atomic::Ordering::SeqCst);
    assert_eq!(before, after, "the abandoned client kept reconnecting");
    holder.abort();
}

#[tokio::test]
async fn a_plain_server_behind_rediss_fails_within_the_connect_timeout() {
    let plain = ConnectionConfig::from_url(&redis_url()).unwrap();
    let mut config = ConnectionConfig::from_url(&format!("rediss://{}", plain.target())).unwrap();
    assert!(config.tls);
    config.connect_timeout = Duration::from_secs(3);
    let (error, took) = connect_error(&config).await;
    assert!(matches!(error, RedisError::Connect { .. }), "{error:?}");
    assert!(took < GUARD / 2, "took {took:?}");
}
