//! Job schedulers (repeatable jobs): the pure parts, such as when a cron pattern runs next.

pub mod cron;
