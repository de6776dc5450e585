#pragma once
/// \file
/// IterDataPipe<T>: the base of stream nodes, and Input<T>, a node's typed edge to one. Subclass it for a custom node
/// (see examples/custom_node.cpp): implement next_impl(), for_each_input() and clone_self(); override reset_impl() when
/// the node keeps per-iteration state, pull_impl() to produce elements in bulk, length_impl() when the length is known,
/// and save_state()/load_state() for checkpoints.

#include <dpipe/core/detail/iter_datapipe_classes.hpp>
// The element operations every IterDataPipe<T> registers when it is built.
#include <dpipe/core/detail/element_ops.hpp>
