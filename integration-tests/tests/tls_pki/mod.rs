//! Test certificates made with the `openssl` command: a CA, a server certificate for
//! `127.0.0.1` / `localhost`, a client certificate, and a second, unrelated CA.

#![allow(dead_code, unreachable_pub)]

use std::path::{Path, PathBuf};

use anyhow::{bail, Context as _, Result};

/// Certificates in a fresh directory, removed when dropped.
pub struct Pki {
    dir: PathBuf,
}

impl Pki {
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// The CA the servers' certificates come from.
    pub fn ca(&self) -> PathBuf {
        self.path("ca.pem")
    }

    /// A CA that signed nothing the servers present.
    pub fn other_ca(&self) -> PathBuf {
        self.path("other-ca.pem")
    }

    pub fn client_cert(&self) -> PathBuf {
        self.path("client.pem")
    }

    pub fn client_key(&self) -> PathBuf {
        self.path("client.key")
    }

    pub fn make(tag: &str) -> Result<Self> {
        let dir = std::env::temp_dir().join(format!("bullmq-tls-{tag}-{}", unique()));
        std::fs::create_dir_all(&dir)?;
        let pki = Self { dir };
        pki.self_signed_ca("ca")?;
        pki.self_signed_ca("other-ca")?;
        pki.signed(
            "server",
            "ca",
            // clientAuth too: cluster nodes present it to each other on the TLS cluster bus.
            "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n",
        )?;
        pki.signed("client", "ca", "extendedKeyUsage=clientAuth\n")?;
        Ok(pki)
    }

    fn self_signed_ca(&self, name: &str) -> Result<()> {
        openssl(
            &self.dir,
            &[
                "req",
                "-x509",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:prime256v1",
                "-nodes",
                "-days",
                "2",
                "-subj",
                &format!("/CN=bullmq test {name}"),
                "-addext",
                "basicConstraints=critical,CA:TRUE",
                "-addext",
                "keyUsage=critical,keyCertSign,cRLSign",
                "-keyout",
                &format!("{name}.key"),
                "-out",
                &format!("{name}.pem"),
            ],
        )
    }

    fn signed(&self, name: &str, ca: &str, extensions: &str) -> Result<()> {
        let ext = format!("{name}.ext");
        std::fs::write(
            self.path(&ext),
            format!("basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\n{extensions}"),
        )?;
        openssl(
            &self.dir,
            &[
                "req",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:prime256v1",
                "-nodes",
                "-subj",
                &format!("/CN=bullmq test {name}"),
                "-keyout",
                &format!("{name}.key"),
                "-out",
                &format!("{name}.csr"),
            ],
        )?;
        openssl(
            &self.dir,
            &[
                "x509",
                "-req",
                "-in",
                &format!("{name}.csr"),
                "-days",
                "2",
                "-CA",
                &format!("{ca}.pem"),
                "-CAkey",
                &format!("{ca}.key"),
                "-CAcreateserial",
                "-extfile",
                &ext,
                "-out",
                &format!("{name}.pem"),
            ],
        )
    }
}

impl Drop for Pki {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn openssl(dir: &Path, args: &[&str]) -> Result<()> {
    let output = std::process::Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .context("running openssl")?;
    if !output.status.success() {
        bail!(
            "openssl {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(())
}

/// A name no other run uses (process id and a counter).
fn unique() -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    format!(
        "{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::SeqCst)
    )
}
