//! Our Lua scripts, embedded at compile time and run with `EVALSHA`.
//!
//! A [`Script`] is assembled from include files and a body with
//! [`lua_script!`](crate::lua_script): the include mechanism is plain concatenation at compile
//! time, so a shared helper is written once under `lua/includes/` (inside this crate, so the
//! published package carries them) and each script names the helpers it needs. The SHA1 is
//! computed once; on `NOSCRIPT` (a restarted Redis, `SCRIPT FLUSH`, a failover) the script is
//! loaded again and the call is retried transparently with `EVAL`, which caches the script
//! again.

use std::sync::OnceLock;

use fred::interfaces::LuaInterface;
use fred::prelude::{Client, ClientLike, FromValue, Value};
use fred::util::{redis_keyslot, sha1_hash};

use crate::error::{RedisError, Result};

/// One embedded Lua script.
#[derive(Debug)]
pub struct Script {
    name: &'static str,
    source: &'static str,
    sha: OnceLock<String>,
}

impl Script {
    /// A script named `name` (for errors and tracing) with its full assembled source.
    pub const fn new(name: &'static str, source: &'static str) -> Self {
        Self {
            name,
            source,
            sha: OnceLock::new(),
        }
    }

    /// The script's name.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The assembled Lua source (includes first, then the body).
    pub fn source(&self) -> &'static str {
        self.source
    }

    /// SHA1 of the source, as Redis names it.
    pub fn sha(&self) -> &str {
        self.sha.get_or_init(|| sha1_hash(self.source))
    }

    /// Runs the script with `EVALSHA`, loading it first if Redis does not know it.
    ///
    /// # Errors
    ///
    /// [`crate::RedisError::Command`] when Redis fails the call or the script raises an error;
    /// [`crate::RedisError::ScriptKeys`], before sending, when `client` is a cluster client and
    /// `keys` is empty (the call could not be routed to the queue's node) or spans slots.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future may leave the script executed or not; scripts are atomic in Redis.
    pub async fn run<R: FromValue>(
        &self,
        client: &Client,
        keys: Vec<String>,
        args: Vec<Value>,
    ) -> Result<R> {
        if client.is_clustered() {
            // The cluster client routes EVALSHA by its first key; a call without keys would go
            // to a random node, and keys of two slots fail there with CROSSSLOT after the
            // round trip. Both are bugs of the caller: say so before sending anything.
            one_slot(&keys).map_err(|detail| RedisError::ScriptKeys {
                script: self.name,
                detail,
            })?;
        }
        match client
            .evalsha::<R, _, _, _>(self.sha(), keys.clone(), args.clone())
            .await
        {
            Err(error) if error.details().starts_with("NOSCRIPT") => {
                // EVAL sends the source and caches it in one step, so a second flush racing a
                // separate SCRIPT LOAD cannot make this retry fail.
                tracing::debug!(
                    script = self.name,
                    "script not cached by Redis, sending its source"
                );
                Ok(client.eval(self.source, keys, args).await?)
            }
            result => Ok(result?),
        }
    }
}

/// Checks that `keys` is not empty and that every key hashes to the first key's slot.
fn one_slot(keys: &[String]) -> std::result::Result<(), String> {
    let Some(first) = keys.first() else {
        return Err("no KEYS to route the call by".to_owned());
    };
    let slot = redis_keyslot(first.as_bytes());
    match keys
        .iter()
        .find(|key| redis_keyslot(key.as_bytes()) != slot)
    {
        Some(other) => Err(format!(
            "keys `{first}` and `{other}` hash to different slots (give every queue a hash \
             tag, e.g. the prefix `{{bull}}`)"
        )),
        None => Ok(()),
    }
}

/// Declares a [`Script`] static from files under the crate's `lua/` directory, includes first.
///
/// ```ignore
/// lua_script!(pub(crate) static ADD_JOB = "addJob": "includes/events.lua", "add_job.lua");
/// ```
#[macro_export]
macro_rules! lua_script {
    ($vis:vis static $ident:ident = $name:literal : $($file:literal),+ $(,)?) => {
        $vis static $ident: $crate::script::Script = $crate::script::Script::new(
            $name,
            concat!($(include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/lua/", $file)), "\n"),+),
        );
    };
}

#[cfg(test)]
mod tests {
    use super::one_slot;

    #[test]
    fn keys_must_exist_and_share_the_first_ones_slot() {
        let keys = |names: &[&str]| names.iter().map(|k| (*k).to_owned()).collect::<Vec<_>>();
        assert!(one_slot(&keys(&["{bull}:a:wait", "{bull}:b:meta", "{bull}:a:7"])).is_ok());
        assert!(one_slot(&keys(&["bull:{a}:wait", "x:{a}:meta"])).is_ok());
        assert!(one_slot(&[]).unwrap_err().contains("no KEYS"));
        let error = one_slot(&keys(&["{bull}:a:wait", "{other}:a:wait"])).unwrap_err();
        assert!(error.contains("`{other}:a:wait`"), "{error}");
    }
}
