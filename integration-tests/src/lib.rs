//! Integration tests live in `tests/`; this library only compiles the code of the guides that
//! are not part of a crate's own documentation (each as a doctest).

/// `docs/guides/schedulers.md`.
#[cfg(doctest)]
#[doc = include_str!("../../docs/guides/schedulers.md")]
pub struct SchedulersGuide;

/// `docs/guides/workers.md`.
#[cfg(doctest)]
#[doc = include_str!("../../docs/guides/workers.md")]
pub struct WorkersGuide;

/// `docs/recipes/step-jobs.md`.
#[cfg(doctest)]
#[doc = include_str!("../../docs/recipes/step-jobs.md")]
pub struct StepJobsRecipe;

/// `docs/guides/flows.md`.
#[cfg(doctest)]
#[doc = include_str!("../../docs/guides/flows.md")]
pub struct FlowsGuide;

/// `docs/guides/operations.md`.
#[cfg(doctest)]
#[doc = include_str!("../../docs/guides/operations.md")]
pub struct OperationsGuide;
