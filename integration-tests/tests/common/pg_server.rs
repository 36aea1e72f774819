//! A private PostgreSQL server for the tests that stop, restart or kill it: `initdb` into a
//! temporary directory, `pg_ctl` on a free loopback port, trust authentication, a `test`
//! database. Stopped (immediately) and deleted when dropped, by its own `pg_ctl`.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

/// A running private server.
pub struct PgServer {
    bin: PathBuf,
    dir: PathBuf,
    /// Its port on 127.0.0.1.
    pub port: u16,
    as_postgres: bool,
    /// Extra `-c name=value` server settings.
    settings: String,
}

fn bindir() -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
        .filter(|p| p.join("initdb").exists())
        .collect();
    dirs.sort();
    dirs.pop()
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or(55_432)
}

impl PgServer {
    /// Starts one; `None` (after a loud message) when `initdb` is not installed.
    pub fn start() -> Result<Option<Self>> {
        Self::start_with_tls(None)
    }

    /// Starts one serving TLS (besides plain TCP) with this certificate and key (PEM).
    pub fn start_with_tls(tls: Option<(&Path, &Path)>) -> Result<Option<Self>> {
        let Some(bin) = bindir() else {
            eprintln!("\n!!! SKIPPING: no initdb under /usr/lib/postgresql/*/bin !!!\n");
            return Ok(None);
        };
        let dir = std::env::temp_dir().join(format!(
            "bullmq-pg-{}-{}",
            std::process::id(),
            super::unique_queue("srv")
        ));
        std::fs::create_dir_all(&dir)?;
        // initdb refuses to run as root: the server then runs as `postgres`.
        let as_postgres = Command::new("id")
            .arg("-u")
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
            .unwrap_or(false);
        if as_postgres {
            let ok = Command::new("chown")
                .args(["postgres:", dir.to_str().unwrap_or_default()])
                .status()?
                .success();
            if !ok {
                bail!("chown postgres {}", dir.display());
            }
        }
        let mut server = Self {
            bin,
            dir,
            port: free_port(),
            as_postgres,
            settings: String::new(),
        };
        if let Some((cert, key)) = tls {
            // The server reads its key only when the server's user owns it, mode 0600.
            let (c, k) = (server.dir.join("server.crt"), server.dir.join("server.key"));
            std::fs::copy(cert, &c)?;
            std::fs::copy(key, &k)?;
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&k, std::fs::Permissions::from_mode(0o600))?;
            if server.as_postgres {
                for f in [&c, &k] {
                    Command::new("chown").arg("postgres:").arg(f).status()?;
                }
            }
            server.settings = format!(
                " -c ssl=on -c ssl_cert_file={} -c ssl_key_file={}",
                c.display(),
                k.display()
            );
        }
        server.run(
            "initdb",
            &[
                "-D",
                &server.data(),
                "-U",
                "postgres",
                "--auth=trust",
                "-E",
                "UTF8",
                "--no-sync",
            ],
        )?;
        server.ctl(&["start"])?;
        let created = Command::new("psql")
            .args([
                "-X",
                "-q",
                "-d",
                &server.url_of("postgres"),
                "-c",
                "CREATE DATABASE test",
            ])
            .status()?;
        if !created.success() {
            bail!("CREATE DATABASE test on port {}", server.port);
        }
        Ok(Some(server))
    }

    fn data(&self) -> String {
        self.dir.join("data").display().to_string()
    }

    fn run(&self, tool: &str, args: &[&str]) -> Result<()> {
        let path = self.bin.join(tool);
        let mut cmd = if self.as_postgres {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(&path);
            c
        } else {
            Command::new(&path)
        };
        let out = cmd
            .args(args)
            .output()
            .with_context(|| format!("running {}", path.display()))?;
        if !out.status.success() {
            bail!(
                "{tool} {args:?}: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(())
    }

    fn ctl(&self, action: &[&str]) -> Result<()> {
        let data = self.data();
        let log = self.dir.join("server.log").display().to_string();
        let options = format!(
            "-p {} -k /tmp -c listen_addresses=127.0.0.1{}",
            self.port, self.settings
        );
        let mut args = vec!["-D", &data, "-l", &log, "-w", "-o", &options];
        args.extend_from_slice(action);
        self.run("pg_ctl", &args)
    }

    /// `postgres://postgres@127.0.0.1:<port>/test`.
    pub fn url(&self) -> String {
        self.url_of("test")
    }

    fn url_of(&self, db: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{db}", self.port)
    }

    /// `pg_ctl restart -m fast`: every session is ended, the data stays.
    pub fn restart(&self) -> Result<()> {
        self.ctl(&["restart", "-m", "fast"])
    }

    /// `pg_ctl stop -m immediate`.
    pub fn stop(&self) -> Result<()> {
        self.ctl(&["stop", "-m", "immediate"])
    }

    /// The data directory (for logs in failure messages).
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

impl Drop for PgServer {
    fn drop(&mut self) {
        let _ = self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
