use super::*;
use crate::options::{Deduplication, JobOptions, ParentRef};

fn leaf(name: &str, queue: &str) -> FlowJob {
    FlowJob::new(name, queue)
}

fn dedup(id: &str) -> Deduplication {
    Deduplication::new(id)
}

#[test]
fn a_plain_three_level_tree_across_two_queues_is_accepted() {
    let tree = leaf("root", "a").child(leaf("mid", "b").child(leaf("leaf", "a")));
    assert_eq!(validate_flow(&tree, "bull"), Ok(()));
    assert_eq!(tree.len(), 3);
}

#[test]
fn paths_name_the_node_at_fault() {
    let tree = leaf("root", "a")
        .child(leaf("ok", "a"))
        .child(leaf("mid", "a").child(leaf("", "a")));
    let err = validate_flow(&tree, "bull").unwrap_err();
    assert_eq!(
        err,
        FlowValidationError::EmptyName {
            path: FlowPath(vec![1, 0])
        }
    );
    assert_eq!(
        err.to_string(),
        "flow node root.children[1].children[0]: the job name is empty"
    );
}

#[test]
fn an_empty_queue_name_is_refused() {
    let tree = leaf("root", "a").child(leaf("child", ""));
    assert!(matches!(
        validate_flow(&tree, "bull"),
        Err(FlowValidationError::EmptyQueueName { path, .. }) if path == FlowPath(vec![0])
    ));
}

#[test]
fn two_failure_policies_on_a_child_are_refused_with_nodes_message() {
    let opts = JobOptions::new()
        .fail_parent_on_failure(true)
        .ignore_dependency_on_failure(true);
    let tree = leaf("root", "a").child(leaf("child", "a").opts(opts));
    let err = validate_flow(&tree, "bull").unwrap_err();
    match &err {
        FlowValidationError::InvalidOptions { path, source, .. } => {
            assert_eq!(path, &FlowPath(vec![0]));
            assert_eq!(
                source.to_string(),
                "The following options cannot be used together: failParentOnFailure, ignoreDependencyOnFailure"
            );
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn every_pair_of_failure_policies_is_refused_and_each_alone_is_accepted() {
    type Set = fn(JobOptions) -> JobOptions;
    let policies: [Set; 4] = [
        |o| o.fail_parent_on_failure(true),
        |o| o.continue_parent_on_failure(true),
        |o| o.ignore_dependency_on_failure(true),
        |o| o.remove_dependency_on_failure(true),
    ];
    for (i, a) in policies.iter().enumerate() {
        let tree = leaf("root", "q").child(leaf("c", "q").opts(a(JobOptions::new())));
        assert_eq!(validate_flow(&tree, "bull"), Ok(()), "policy {i} alone");
        for b in policies.iter().skip(i + 1) {
            let tree = leaf("root", "q").child(leaf("c", "q").opts(b(a(JobOptions::new()))));
            assert!(matches!(
                validate_flow(&tree, "bull"),
                Err(FlowValidationError::InvalidOptions {
                    source: ValidationError::ExclusiveOptions { .. },
                    ..
                })
            ));
        }
    }
}

#[test]
fn deduplication_on_a_node_with_children_is_refused_before_anything_else() {
    // The bad name deeper down is found later: Node checks deduplication over the whole tree
    // first.
    let tree = leaf("root", "a").child(leaf("", "a")).child(
        leaf("mid", "a")
            .opts(JobOptions::new().deduplication(dedup("d")))
            .child(leaf("x", "a")),
    );
    assert_eq!(
        validate_flow(&tree, "bull"),
        Err(FlowValidationError::DeduplicationWithChildren {
            path: FlowPath(vec![1]),
            name: "mid".into()
        })
    );
}

#[test]
fn keep_last_if_active_on_a_node_with_a_parent_is_refused() {
    let mut d = dedup("d");
    d.keep_last_if_active = Some(true);
    let tree =
        leaf("root", "a").child(leaf("c", "a").opts(JobOptions::new().deduplication(d.clone())));
    assert!(matches!(
        validate_flow(&tree, "bull"),
        Err(FlowValidationError::KeepLastIfActiveWithParent { .. })
    ));
    // A root with an explicit parent has a parent too.
    let root = leaf("root", "a").opts(
        JobOptions::new()
            .deduplication(d.clone())
            .parent(ParentRef::new("p", "bull:other")),
    );
    assert!(matches!(
        validate_flow(&root, "bull"),
        Err(FlowValidationError::KeepLastIfActiveWithParent { .. })
    ));
    // A lone root may use it.
    let lone = leaf("root", "a").opts(JobOptions::new().deduplication(d));
    assert_eq!(validate_flow(&lone, "bull"), Ok(()));
}

#[test]
fn plain_deduplication_on_a_child_is_refused_as_deduplication_with_a_parent() {
    let tree =
        leaf("root", "a").child(leaf("c", "a").opts(JobOptions::new().deduplication(dedup("d"))));
    assert!(matches!(
        validate_flow(&tree, "bull"),
        Err(FlowValidationError::InvalidOptions {
            source: ValidationError::DeduplicationWithParent,
            ..
        })
    ));
}

#[test]
fn a_parent_option_below_the_root_is_refused() {
    let child = leaf("c", "a").opts(JobOptions::new().parent(ParentRef::new("p", "bull:a")));
    let tree = leaf("root", "a").child(child);
    assert!(matches!(
        validate_flow(&tree, "bull"),
        Err(FlowValidationError::ParentOnChild { path, .. }) if path == FlowPath(vec![0])
    ));
    let root = leaf("root", "a").opts(JobOptions::new().parent(ParentRef::new("p", "bull:a")));
    assert_eq!(validate_flow(&root, "bull"), Ok(()));
}

#[test]
fn bad_ids_are_refused_with_the_job_level_error() {
    let tree = leaf("root", "a").child(leaf("c", "a").opts(JobOptions::new().job_id("12")));
    assert!(matches!(
        validate_flow(&tree, "bull"),
        Err(FlowValidationError::InvalidOptions {
            source: ValidationError::JobIdInteger { .. },
            ..
        })
    ));
}

#[test]
fn untagged_queues_may_mix_freely() {
    let tree = leaf("root", "a").child(leaf("c", "b").prefix("other"));
    assert_eq!(validate_flow(&tree, "bull"), Ok(()));
}

#[test]
fn queues_sharing_one_tag_are_accepted() {
    let tree = leaf("root", "a").child(leaf("c", "b"));
    assert_eq!(validate_flow(&tree, "{bull}"), Ok(()));
    let tree = leaf("root", "{x}a").child(leaf("c", "{x}b").prefix("p"));
    assert_eq!(validate_flow(&tree, "bull"), Ok(()));
}

#[test]
fn a_tagged_queue_next_to_an_untagged_one_is_cross_slot() {
    let tree = leaf("root", "a").child(leaf("c", "b").prefix("plain"));
    let err = validate_flow(&tree, "{bull}").unwrap_err();
    assert_eq!(
        err,
        FlowValidationError::CrossSlot {
            queues: vec![
                QueueTag {
                    queue: "{bull}:a".into(),
                    tag: Some("bull".into())
                },
                QueueTag {
                    queue: "plain:b".into(),
                    tag: None
                },
            ]
        }
    );
    assert_eq!(
        err.to_string(),
        "the queues of a flow must share one hash tag when any is tagged: {bull}:a {bull}, plain:b (untagged)"
    );
}

#[test]
fn two_different_tags_are_cross_slot() {
    let tree = leaf("root", "a").child(leaf("c", "b").prefix("{other}"));
    assert!(matches!(
        validate_flow(&tree, "{bull}"),
        Err(FlowValidationError::CrossSlot { queues }) if queues.len() == 2
    ));
}

#[test]
fn a_custom_id_with_braces_counts_in_the_key_tag() {
    // `bull:a:{x}` is tagged `x`, `bull:a:` is not: two slots.
    let tree = leaf("root", "a").child(leaf("c", "a").opts(JobOptions::new().job_id("{x}")));
    assert!(matches!(
        validate_flow(&tree, "bull"),
        Err(FlowValidationError::CrossSlot { .. })
    ));
}

#[test]
fn the_external_parent_of_the_root_counts_in_the_slot_check() {
    let root = leaf("root", "a").opts(JobOptions::new().parent(ParentRef::new("p", "plain:a")));
    assert!(matches!(
        validate_flow(&root, "{bull}"),
        Err(FlowValidationError::CrossSlot { .. })
    ));
}

#[test]
fn bulk_paths_start_with_the_flows_index_and_the_slot_check_spans_all_flows() {
    let trees = [leaf("one", "a"), leaf("two", "a").child(leaf("", "a"))];
    assert_eq!(
        validate_flows(&trees, "bull"),
        Err(FlowValidationError::EmptyName {
            path: FlowPath(vec![1, 0])
        })
    );
    let trees = [leaf("one", "a"), leaf("two", "a").prefix("{t}")];
    assert!(matches!(
        validate_flows(&trees, "bull"),
        Err(FlowValidationError::CrossSlot { .. })
    ));
}

#[test]
fn a_deep_chain_does_not_exhaust_the_stack() {
    let mut tree = leaf("n", "a");
    for _ in 0..3_000 {
        tree = leaf("n", "a").child(tree);
    }
    assert_eq!(validate_flow(&tree, "bull"), Ok(()));
    assert_eq!(tree.len(), 3_001);
    // Dropping a deep tree recurses; leak it rather than depend on the test thread's stack.
    std::mem::forget(tree);
}
