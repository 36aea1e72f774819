//! Decoding of script replies (nested arrays of integers and bulk strings).

use std::collections::HashMap;

use fred::prelude::Value;

use crate::error::{RedisError, Result};

pub(crate) fn unexpected(script: &'static str, detail: impl Into<String>) -> RedisError {
    RedisError::UnexpectedReply {
        script,
        detail: detail.into(),
    }
}

pub(crate) fn array(script: &'static str, value: Value) -> Result<Vec<Value>> {
    match value {
        Value::Array(items) => Ok(items),
        Value::Null => Ok(Vec::new()),
        other => Err(unexpected(
            script,
            format!("expected an array, got {other:?}"),
        )),
    }
}

pub(crate) fn string(script: &'static str, value: Value) -> Result<String> {
    match value {
        Value::String(s) => Ok(s.to_string()),
        Value::Bytes(b) => Ok(String::from_utf8_lossy(&b).into_owned()),
        Value::Integer(i) => Ok(i.to_string()),
        Value::Double(d) => Ok(d.to_string()),
        other => Err(unexpected(
            script,
            format!("expected a string, got {other:?}"),
        )),
    }
}

pub(crate) fn integer(script: &'static str, value: Value) -> Result<i64> {
    match value {
        Value::Integer(i) => Ok(i),
        Value::Double(d) => Ok(d as i64),
        Value::String(s) => s
            .parse()
            .map_err(|_| unexpected(script, format!("expected an integer, got {s:?}"))),
        other => Err(unexpected(
            script,
            format!("expected an integer, got {other:?}"),
        )),
    }
}

/// An `HGETALL` reply (flat field, value list, or a map) as a map.
pub(crate) fn hash(script: &'static str, value: Value) -> Result<HashMap<String, String>> {
    if let Value::Map(map) = value {
        return map
            .inner()
            .into_iter()
            .map(|(field, value)| {
                let field = field
                    .into_string()
                    .ok_or_else(|| unexpected(script, "hash field is not text"))?;
                Ok((field, string(script, value)?))
            })
            .collect();
    }
    let items = array(script, value)?;
    let mut map = HashMap::with_capacity(items.len() / 2);
    let mut iter = items.into_iter();
    while let (Some(field), Some(value)) = (iter.next(), iter.next()) {
        map.insert(string(script, field)?, string(script, value)?);
    }
    Ok(map)
}

pub(crate) fn strings(script: &'static str, value: Value) -> Result<Vec<String>> {
    array(script, value)?
        .into_iter()
        .map(|v| string(script, v))
        .collect()
}
