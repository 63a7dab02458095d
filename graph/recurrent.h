// ONNX's recurrent layers (LSTM, GRU, RNN: CRNN text recognisers, video and sequence heads on
// a CNN) split at import into what runs on the existing kernels and one recurrence:
//
//   X [T, N, I] (layout 1: [N, T, I], transposed) -> MatMul with W^T [I, D * G * H] -> + Wb
//     = XW [T, N, D * G * H]                 (every time step at once: the FC / MatMul kernels)
//   Recurrence(XW, R^T [D, H, G * H], Rb [D, G * H], sequence_lens, initial_h, initial_c, P)
//     -> Y [T, D, N, H], Y_h [D, N, H], Y_c [D, N, H]   (layout 1: transposed back)
//
// D directions, G gates (LSTM 4: i o f c, GRU 3: z r h, RNN 1), H hidden units. The recurrence
// adds h_{t-1} R^T + Rb to each step's row of XW and applies the cell's activations, exactly as
// ONNX defines the op (GRU's linear_before_reset included); Wb is added once in the expansion.
// The internal op's attributes: cell ("LSTM" / "GRU" / "RNN"), direction, hidden_size,
// linear_before_reset, clip, and the activations as post-op kinds (rnn_acts / rnn_alpha /
// rnn_beta, one per activation: f, g, h for LSTM, f, g for GRU, f for RNN, per direction).
#pragma once

#include <string>
#include <vector>

#include "graph/ir.h"
#include "graph/post_ops.h"

namespace kiln {

// A Recurrence node's parameters, checked (recurrence_spec throws naming the node).
struct RecurrenceSpec {
  int gates = 1;         // G
  int64_t hidden = 0;    // H
  int directions = 1;    // D
  bool reverse = false;  // a single direction that runs backwards
  bool lstm = false, gru = false;
  bool linear_before_reset = false;  // GRU
  float clip = 0;                    // > 0: gate inputs clipped to [-clip, clip]
  // acts[d][k]: the k-th activation of direction d, as a chain (clip first when set).
  std::vector<std::vector<std::vector<PostOp>>> acts;
  int acts_per_direction() const { return lstm ? 3 : gru ? 2 : 1; }
};
RecurrenceSpec recurrence_spec(const Node& n);

// Appends n's expansion to `out` when n is LSTM, GRU or RNN; returns false otherwise. Throws
// (naming the node) for invalid or unsupported attributes.
bool expand_recurrent(Graph& g, const Node& n, std::vector<Node>& out);

// Shape inference of the internal Recurrence op.
void infer_recurrence(Graph& g, Node& n);

}  // namespace kiln
