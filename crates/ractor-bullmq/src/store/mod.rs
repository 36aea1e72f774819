//! The seam between the actors and Redis.
