//! Every URL form `ConnectionConfig::from_url` accepts, what it makes of each, and the typed
//! refusals of bad ones (which name the problem and never the password).

use std::path::PathBuf;

use bullmq_redis::{ConnectionConfig, Node, RedisError, Topology};

fn config_error(url: &str) -> String {
    match ConnectionConfig::from_url(url) {
        Err(RedisError::Config(message)) => message,
        other => panic!("{url}: expected RedisError::Config, got {other:?}"),
    }
}

#[test]
fn a_single_server_url_keeps_every_part() {
    let config = ConnectionConfig::from_url("redis://al:s3cret@cache.internal:6390/4").unwrap();
    assert_eq!(config.topology, Topology::Single);
    assert_eq!(
        (config.host.as_str(), config.port, config.db),
        ("cache.internal", 6390, 4)
    );
    assert_eq!(config.username.as_deref(), Some("al"));
    assert_eq!(config.password.as_deref(), Some("s3cret"));
    assert!(!config.tls);
    assert_eq!(config.target(), "cache.internal:6390");

    let default_port = ConnectionConfig::from_url("valkey://h").unwrap();
    assert_eq!((default_port.port, default_port.db), (6379, 0));
    let password_only = ConnectionConfig::from_url("rediss://:p%40ss@h:1").unwrap();
    assert_eq!(password_only.password.as_deref(), Some("p@ss"));
    assert!(password_only.tls);
}

#[test]
fn a_cluster_url_lists_its_seed_nodes_in_order() {
    for scheme in [
        "redis-cluster",
        "valkey-cluster",
        "rediss-cluster",
        "valkeys-cluster",
    ] {
        let url = format!("{scheme}://u:pw@10.0.0.1:7000?node=10.0.0.2:7001&node=10.0.0.3:7002");
        let config = ConnectionConfig::from_url(&url).unwrap();
        assert_eq!(
            config.topology,
            Topology::Cluster {
                nodes: vec![
                    Node::new("10.0.0.1", 7000),
                    Node::new("10.0.0.2", 7001),
                    Node::new("10.0.0.3", 7002),
                ]
            },
            "{url}"
        );
        assert_eq!(
            config.tls,
            scheme.starts_with("rediss") || scheme.starts_with("valkeys"),
            "{url}"
        );
        assert_eq!((config.host.as_str(), config.port), ("10.0.0.1", 7000));
        assert_eq!(config.password.as_deref(), Some("pw"));
        assert_eq!(
            config.target(),
            "cluster 10.0.0.1:7000,10.0.0.2:7001,10.0.0.3:7002"
        );
    }
    let one = ConnectionConfig::from_url("redis-cluster://h:7000").unwrap();
    assert_eq!(
        one.topology,
        Topology::Cluster {
            nodes: vec![Node::new("h", 7000)]
        }
    );
    assert!(ConnectionConfig::from_url("redis-cluster://h:7000/0").is_ok());
}

#[test]
fn a_sentinel_url_names_the_service_and_the_sentinels() {
    let url = "rediss-sentinel://app:dbpw@s1:26380/2?sentinelServiceName=mymaster&node=s2:26381\
               &sentinelUsername=watch&sentinelPassword=sentpw";
    let config = ConnectionConfig::from_url(url).unwrap();
    assert_eq!(
        config.topology,
        Topology::Sentinel {
            service_name: "mymaster".into(),
            nodes: vec![Node::new("s1", 26380), Node::new("s2", 26381)],
            username: Some("watch".into()),
            password: Some("sentpw".into()),
        }
    );
    assert!(config.tls);
    assert_eq!(config.db, 2);
    assert_eq!(config.username.as_deref(), Some("app"));
    assert_eq!(config.password.as_deref(), Some("dbpw"));
    assert_eq!(
        config.target(),
        "sentinel service `mymaster` at s1:26380,s2:26381"
    );
    let debug = format!("{config:?}");
    assert!(
        !debug.contains("dbpw") && !debug.contains("sentpw"),
        "{debug}"
    );

    let default_port =
        ConnectionConfig::from_url("valkey-sentinel://s1?sentinelServiceName=m").unwrap();
    assert_eq!(default_port.port, 26379);
    assert!(!default_port.tls);
}

#[test]
fn tls_parameters_fill_the_tls_options() {
    let config = ConnectionConfig::from_url(
        "rediss://h:6380?tls_ca=/etc/redis/ca.pem&tls_cert=/etc/redis/client.pem\
         &tls_key=/etc/redis/client.key&tls_server_name=redis.internal",
    )
    .unwrap();
    assert!(config.tls);
    let tls = &config.tls_options;
    assert_eq!(tls.ca_file, Some(PathBuf::from("/etc/redis/ca.pem")));
    assert_eq!(tls.cert_file, Some(PathBuf::from("/etc/redis/client.pem")));
    assert_eq!(tls.key_file, Some(PathBuf::from("/etc/redis/client.key")));
    assert_eq!(tls.server_name.as_deref(), Some("redis.internal"));
    assert!(!tls.danger_accept_invalid_certs);

    let insecure =
        ConnectionConfig::from_url("rediss-cluster://h:1?tls_danger_accept_invalid_certs=true")
            .unwrap();
    assert!(insecure.tls_options.danger_accept_invalid_certs);
    let spelled_out = config_error("rediss://h:1?tls_danger_accept_invalid_certs=maybe");
    assert!(spelled_out.contains("true or false"), "{spelled_out}");
}

#[test]
fn builders_set_the_topology_and_turn_tls_on() {
    let cluster = ConnectionConfig::default().cluster([("a", 1), ("b", 2)]);
    assert_eq!(cluster.target(), "cluster a:1,b:2");
    assert_eq!((cluster.host.as_str(), cluster.port), ("a", 1));

    let sentinel = ConnectionConfig::default()
        .sentinel("mymaster", [Node::new("s", 26379)])
        .sentinel_credentials(None, Some("pw".into()));
    assert!(matches!(
        &sentinel.topology,
        Topology::Sentinel { password: Some(p), .. } if p == "pw"
    ));

    let tls = ConnectionConfig::default()
        .tls_client_cert("c.pem", "k.pem")
        .tls_server_name("localhost");
    assert!(tls.tls);
    assert_eq!(tls.tls_options.key_file, Some(PathBuf::from("k.pem")));
    assert!(
        ConnectionConfig::default()
            .danger_accept_invalid_certs()
            .tls
    );
    assert!(!ConnectionConfig::default().tls);
}

#[test]
fn bad_urls_name_the_problem_without_the_password() {
    let cases = [
        ("redis://u:hunter2@h:1?node=h2:2", "redis-cluster://"),
        (
            "redis://u:hunter2@h:1?sentinelServiceName=m",
            "redis-sentinel://",
        ),
        ("redis-sentinel://u:hunter2@h:1", "sentinel service name"),
        ("redis-cluster://u:hunter2@h:1/3", "database 0 only"),
        ("redis-cluster://u:hunter2@h:1?node=h2", "h2"),
        ("redis://u:hunter2@h:1?tls_ca=/ca.pem", "not a TLS one"),
        (
            "rediss://u:hunter2@h:1?tls_ca_file=/ca.pem",
            "unknown query parameter `tls_ca_file`",
        ),
        ("redis://u:hunter2@h:99999", "not a valid URL"),
        ("redis://u:hunter2@:1", "not a valid URL"),
        (
            "redis-sentinel://h:1?sentinelServiceName=m&sentinelPassword=hunter2&node=x",
            "x",
        ),
    ];
    for (url, expected) in cases {
        let message = config_error(url);
        assert!(
            message.to_lowercase().contains(&expected.to_lowercase()),
            "{url}: {message}"
        );
        assert!(
            !message.contains("hunter2"),
            "{url}: password shown in {message}"
        );
    }
    for url in [
        "redis-shard://h:1",
        "redis+unix:///tmp/r.sock",
        "rediss-cluste://h",
    ] {
        assert!(
            matches!(
                ConnectionConfig::from_url(url),
                Err(RedisError::UnsupportedScheme { .. })
            ),
            "{url}"
        );
    }
}

#[test]
fn incomplete_code_built_topologies_are_refused_before_connecting() {
    let empty = ConnectionConfig::default().cluster(Vec::<Node>::new());
    assert!(matches!(empty.check(), Err(RedisError::Config(m)) if m.contains("at least one")));
    let nameless = ConnectionConfig::default().sentinel("", [("s", 26379)]);
    assert!(matches!(nameless.check(), Err(RedisError::Config(m)) if m.contains("service name")));
    let mut db = ConnectionConfig::default().cluster([("a", 1)]);
    db.db = 2;
    assert!(matches!(db.check(), Err(RedisError::Config(m)) if m.contains("database 0")));
    assert!(ConnectionConfig::default().check().is_ok());
}

#[test]
fn replica_reads_are_opt_in_and_sentinel_only() {
    let url = "redis-sentinel://app:dbpw@s1:26380/2?sentinelServiceName=mymaster\
               &node=s2:26381&replica_reads=true";
    let config = ConnectionConfig::from_url(url).unwrap();
    assert!(config.replica_reads);
    assert!(matches!(config.topology, Topology::Sentinel { .. }));
    assert_eq!(config.db, 2);
    assert!(config.check().is_ok());
    assert!(format!("{config:?}").contains("replica_reads: true"));

    let default = ConnectionConfig::from_url("redis-sentinel://s1?sentinelServiceName=m").unwrap();
    assert!(!default.replica_reads);
    assert!(!ConnectionConfig::default().replica_reads);

    for url in [
        "redis://u:hunter2@h:1?replica_reads=true",
        "valkey-cluster://u:hunter2@h:7000?replica_reads=true",
    ] {
        let message = config_error(url);
        assert!(message.contains("redis-sentinel://"), "{url}: {message}");
        assert!(!message.contains("hunter2"), "{url}: {message}");
    }
    let message = config_error("redis-sentinel://h?sentinelServiceName=m&replica_reads=sometimes");
    assert!(message.contains("true or false"), "{message}");

    // Built in code: refused on the other topologies, before connecting.
    for config in [
        ConnectionConfig::default().replica_reads(true),
        ConnectionConfig::default()
            .cluster([("a", 7000)])
            .replica_reads(true),
    ] {
        assert!(
            matches!(config.check(), Err(RedisError::Config(m)) if m.contains("replica reads need Sentinel")),
            "{config:?}"
        );
    }
    let sentinel = ConnectionConfig::default()
        .sentinel("mymaster", [("s", 26379)])
        .replica_reads(true);
    assert!(sentinel.replica_reads && sentinel.check().is_ok());
}

#[tokio::test]
async fn connect_refuses_replica_reads_without_sentinel() {
    let error = ConnectionConfig::default()
        .replica_reads(true)
        .connect(None)
        .await
        .unwrap_err();
    assert!(
        matches!(&error, RedisError::Config(m) if m.contains("replica reads need Sentinel")),
        "{error}"
    );
}
