//! Reading script replies into Rust values, with errors that name the script.

use fred::prelude::Value;

use crate::error::{RedisError, Result};

pub(crate) fn unexpected(script: &'static str, detail: impl Into<String>) -> RedisError {
    RedisError::UnexpectedReply {
        script,
        detail: detail.into(),
    }
}

pub(crate) fn integer(script: &'static str, value: &Value) -> Result<i64> {
    value
        .as_i64()
        .ok_or_else(|| unexpected(script, format!("expected an integer, got {value:?}")))
}

pub(crate) fn string(script: &'static str, value: Value) -> Result<String> {
    match value {
        Value::String(_) | Value::Bytes(_) | Value::Integer(_) => value
            .into_string()
            .ok_or_else(|| unexpected(script, "expected a UTF-8 string")),
        other => Err(unexpected(
            script,
            format!("expected a string, got {other:?}"),
        )),
    }
}

pub(crate) fn array(script: &'static str, value: Value) -> Result<Vec<Value>> {
    match value {
        Value::Array(items) => Ok(items),
        // Redis turns an empty Lua table into an empty array, but be lenient with nil.
        Value::Null => Ok(Vec::new()),
        other => Err(unexpected(
            script,
            format!("expected an array, got {other:?}"),
        )),
    }
}

pub(crate) fn strings(script: &'static str, value: Value) -> Result<Vec<String>> {
    array(script, value)?
        .into_iter()
        .map(|item| string(script, item))
        .collect()
}
