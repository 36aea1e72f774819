//! The Worker actor and its LockManager and job actors.
