/* Kiln public C API (C99 and C++ compatible).
 *
 * Shaped like ONNX Runtime's C API:
 *   - Opaque handles: kiln_session, kiln_status.
 *   - Every function that can fail returns a kiln_status*. NULL means success; a non-NULL status
 *     carries a kiln_code and a message (naming the argument, file, input or node at fault) and
 *     must be freed with kiln_status_release(). Out-parameters are only written on success
 *     (except that session create functions set *out to NULL on failure).
 *   - Options are a struct whose first field is struct_size, so it can grow without breaking
 *     old clients: fill it with kiln_options_init() and then set the fields you care about.
 *   - Callers own every buffer: kiln_session_run reads inputs from and writes outputs into
 *     caller-provided memory whose byte sizes are checked against the model. (Outputs whose
 *     size each run decides are the exception: kiln_session_run_outputs allocates them.)
 *   - No C++ exception and no abort ever crosses this interface.
 *
 * Typical use:
 *   kiln_options opts;
 *   kiln_options_init(&opts);
 *   opts.threads = 4;
 *   kiln_session* s = NULL;
 *   kiln_status* st = kiln_session_create_from_file("model.onnx", &opts, &s);
 *   if (st) { fprintf(stderr, "%s\n", kiln_status_message(st)); kiln_status_release(st); }
 *
 * Logging and process state: loading a session changes nothing in the host process but its
 * own memory. Kiln writes its messages through a private spdlog logger (never registered, never
 * spdlog's default logger; spdlog's global level and patterns are untouched) to stderr as
 * "[kiln W] message", or to the host's callback (kiln_set_log_callback). A session with
 * options.log_level >= 0 uses that level for its own messages (load and run); the others use
 * the process threshold: the callback's level, else KILN_LOG_LEVEL, else warn.
 *
 * Environment: Kiln reads its variables (KILN_LOG_LEVEL, KILN_MAX_ISA, KILN_CACHE_DIR,
 * XDG_CACHE_HOME, HOME, KILN_COLD_WEIGHTS, KILN_FLOW, KILN_HUGE_PAGES, KILN_JIT_DUMP,
 * KILN_PERF_MAP, KILN_JIT_LOG; see README.md) when a session is created, each creation afresh,
 * and never while a session runs. KILN_PERF_MAP's choice of code mapping is made once, at the
 * first kernel the process generates.
 *
 * Thread safety: kiln_session_run may be called concurrently from any number of threads on the
 * same session (each run uses its own intermediate buffers; after creation the session only adds
 * plans for other batches, kiln_session_run_batch, under its own lock). All query functions are
 * likewise safe to call concurrently. Releasing a session while another thread uses it is not
 * allowed. Statuses are owned by the caller and are not shared between calls.
 */
#ifndef KILN_KILN_H_
#define KILN_KILN_H_

#include <kiln/version.h> /* KILN_VERSION_STRING, KILN_API_VERSION */
#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32)
#if defined(KILN_BUILDING_LIBRARY)
#define KILN_API __declspec(dllexport)
#else
#define KILN_API __declspec(dllimport)
#endif
#elif defined(__GNUC__) || defined(__clang__)
#define KILN_API __attribute__((visibility("default")))
#else
#define KILN_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Status codes. Numeric values are part of the ABI and never change. */
typedef enum kiln_code {
  KILN_OK = 0,
  KILN_INVALID_ARGUMENT = 1, /* bad call: NULL pointer, wrong buffer size or count, bad index */
  KILN_INVALID_MODEL = 2,    /* malformed, truncated or inconsistent model */
  KILN_UNSUPPORTED = 3,      /* valid ONNX that Kiln does not implement (op, attribute, dtype) */
  KILN_SHAPE_MISMATCH = 4,   /* input shape or dtype does not match the model */
  KILN_IO_ERROR = 5,         /* file could not be read or written */
  KILN_OUT_OF_MEMORY = 6,
  KILN_INTERNAL = 7 /* a bug in Kiln; please report it with the message */
} kiln_code;

/* Element types; numeric values equal ONNX TensorProto.DataType codes. */
/* The values are ONNX's element type codes. KILN_DTYPE_BOOL: one byte per element, 0 or 1
 * (numpy.bool_). U8 / I8: the inputs and outputs a model declares uint8 / int8 (an image, a
 * QuantizeLinear output); I32: those it declares int32 (computed in int64 inside); F64: those
 * it declares double (computed in float32 inside). */
typedef enum kiln_dtype {
  KILN_DTYPE_F32 = 1,
  KILN_DTYPE_U8 = 2,
  KILN_DTYPE_I8 = 3,
  KILN_DTYPE_I32 = 6,
  KILN_DTYPE_I64 = 7,
  KILN_DTYPE_BOOL = 9,
  KILN_DTYPE_F64 = 11
} kiln_dtype;

/* Instruction-set caps for kiln_options.max_isa (0 = no cap, so a zeroed field is the default).
 * Capping lets one machine run and test the narrower code paths. */
typedef enum kiln_isa {
  KILN_ISA_DEFAULT = 0,
  KILN_ISA_SCALAR = 1, /* reference-style code, no SIMD JIT */
  KILN_ISA_AVX2 = 2,   /* AVX2 + FMA */
  KILN_ISA_AVX512 = 3  /* AVX-512 F/VL/BW/DQ */
} kiln_isa;

typedef struct kiln_status kiln_status;
typedef struct kiln_session kiln_session;

/* ---- status ------------------------------------------------------------------------------ */

/* KILN_OK for a NULL status. */
KILN_API kiln_code kiln_status_code(const kiln_status* status);
/* "" for a NULL status. The string lives until kiln_status_release(status). */
KILN_API const char* kiln_status_message(const kiln_status* status);
/* NULL is allowed (no-op). */
KILN_API void kiln_status_release(kiln_status* status);
/* Readable name: "ok", "invalid argument", "I/O error", ...; "unknown" outside kiln_code. */
KILN_API const char* kiln_code_name(kiln_code code);

/* The library's version, e.g. "0.2.0" (static string), and as KILN_API_VERSION's number
 * (MAJOR * 10000 + MINOR * 100 + PATCH). A program compiled against headers of API version V
 * needs kiln_api_version() >= V with the same major version (kiln/version.h). */
KILN_API const char* kiln_version(void);
KILN_API int32_t kiln_api_version(void);

/* ---- logging ----------------------------------------------------------------------------- */

/* Message levels; also the values of kiln_options.log_level. */
typedef enum kiln_log_level {
  KILN_LOG_TRACE = 0,
  KILN_LOG_DEBUG = 1,
  KILN_LOG_INFO = 2,
  KILN_LOG_WARN = 3,
  KILN_LOG_ERROR = 4,
  KILN_LOG_CRITICAL = 5,
  KILN_LOG_OFF = 6
} kiln_log_level;

/* Receives one message: a kiln_log_level and the text (UTF-8, no trailing newline, valid only
 * during the call). */
typedef void (*kiln_log_fn)(void* user_data, int32_t level, const char* message);

/* Routes every Kiln message to fn(user_data, level, message) instead of stderr (fn NULL: back to
 * stderr) and sets the process threshold `level` (a kiln_log_level; -1: KILN_LOG_LEVEL, else
 * warn). Sessions whose options.log_level is >= 0 keep their own level.
 * The callback may be called from any thread that creates or runs a session, but never by two
 * threads at once. Messages Kiln raises while the callback runs are dropped, and calling
 * kiln_set_log_callback from inside it returns KILN_INVALID_ARGUMENT (it would deadlock). When
 * kiln_set_log_callback returns, the previous callback is not running and is never called
 * again, so its user_data may be freed. An exception thrown by a C++ callback is swallowed. */
KILN_API kiln_status* kiln_set_log_callback(int32_t level, kiln_log_fn fn, void* user_data);

/* ---- options ----------------------------------------------------------------------------- */

/* Session options. Always initialise with kiln_options_init(): it sets struct_size to the size
 * this header was compiled with and every field to its default.
 *
 * Versioning: new fields are only ever appended (the "revision" comments below mark them). The
 * library reads the fields that lie within struct_size and uses defaults for the rest, so a client
 * built against an older header keeps working. A struct_size larger than the library knows (a newer
 * client) is accepted; the unknown tail is ignored. A struct_size smaller than this first version
 * of the struct (including 0, as when the caller forgot kiln_options_init) is rejected with
 * KILN_INVALID_ARGUMENT. */
typedef struct kiln_options {
  size_t struct_size; /* sizeof(kiln_options), set by kiln_options_init */
  int32_t threads;    /* worker threads; 0 = every CPU this process may run on (default) */
  int32_t log_level;  /* this session's messages: a kiln_log_level (0 trace .. 6 off); -1 = the
                         process threshold: kiln_set_log_callback's level, else the
                         KILN_LOG_LEVEL environment variable, else warn (default) */
  int64_t batch_size; /* batch to fix a symbolic/first dim to; 0 = the model's (a symbolic batch
                         becomes 1) (default) */
  /* Tuning cache directory; NULL or "" = $KILN_CACHE_DIR, else $XDG_CACHE_HOME/kiln, else
   * ~/.cache/kiln (KILN_CACHE_DIR=off disables the default cache). */
  const char* cache_dir;
  /* How much is measured at load: a kiln_tuning value; 0 = KILN_TUNING_FAST. */
  int32_t tuning_mode;
  /* A kiln_isa: cap on the instruction set kernels are generated for. KILN_ISA_DEFAULT (0) =
   * the best the CPU supports (the KILN_MAX_ISA environment variable still applies). */
  int32_t max_isa;
  /* --- appended in version 2 ---------------------------------------------------------------- */
  /* How kernels and layouts are chosen: a kiln_strategy value; 0 = KILN_STRATEGY_GLOBAL. */
  int32_t strategy;
  /* Nonzero: neither read nor write the tuning cache (every load measures again). */
  int32_t disable_cache;
  /* --- appended in version 3 ---------------------------------------------------------------- */
  /* Wall-clock milliseconds one load may spend measuring kernels and layout conversions;
   * 0 = the default: 10000 with KILN_TUNING_FAST, 60000 with KILN_TUNING_FULL. Kernels too big
   * to run whole within a measurement are timed on a sample of their work, and a measurement
   * is not begun when it is predicted not to fit what is left. At the budget, nodes not
   * measured yet keep the cost model's choice (logged as a warning); their measured times stay
   * in the tuning cache but the plan is not stored, so the next load measures more. The rest
   * of a load (parsing, code generation, weight packing) is not part of this budget. */
  double profile_budget_ms;
  /* --- appended in version 4 ---------------------------------------------------------------- */
  /* Which convolution algorithms may add rounding error: a kiln_accuracy value; 0 =
   * KILN_ACCURACY_DEFAULT. */
  int32_t accuracy;
  /* --- appended in version 5 ---------------------------------------------------------------- */
  /* Input shapes set at load, as text: "NAME:DIMxDIMx...", several separated by ',', e.g.
   * "images:1x3x320x320,scale:1x2" (NULL or "" = none). A name runs to the item's last ':', so
   * "input:0:1x3x8x8" sets input "input:0"; names holding ',' cannot be given. Each shape gives
   * every dim of its input (dims 1..2^32). Symbolic dims other than dim 0 must be given
   * (else KILN_UNSUPPORTED naming the input and dim; a symbolic dim 0, the batch, defaults to
   * 1). A nonzero batch_size is dim 0 of every input, overriding these shapes' dim 0. A dim the
   * model fixes may be given another size where the model's shape inference takes it (a fully
   * convolutional network takes any height and width; a Reshape to a constant shape does not): else
   * KILN_SHAPE_MISMATCH naming the input, the dim, the size the model declares and the node that
   * refused it. Bad text, a dim < 1 or an unknown input name: KILN_INVALID_ARGUMENT; a shape of the
   * wrong rank: KILN_SHAPE_MISMATCH. The string is only read during session creation. */
  const char* input_shapes;
  /* --- appended in version 6 ---------------------------------------------------------------- */
  /* What convolutions may compute in: a kiln_precision value; 0 = KILN_PRECISION_F32. */
  int32_t precision;
} kiln_options;

/* tuning_mode values. NONE: the built-in cost model, nothing measured; FAST: measure the
 * candidates the cost model finds plausible; FULL: measure every candidate. Measured times
 * and solved plans are kept in the tuning cache, so the next load of the model is fast. */
typedef enum kiln_tuning {
  KILN_TUNING_DEFAULT = 0,
  KILN_TUNING_NONE = 1,
  KILN_TUNING_FAST = 2,
  KILN_TUNING_FULL = 3
} kiln_tuning;

/* strategy values. GLOBAL: the whole-network optimum (PBQP) of kernel times plus layout
 * conversion times; LOCAL: each node's fastest kernel, conversions ignored when choosing;
 * FIXED: one blocked layout and the direct conv family everywhere; HEURISTIC: the cost model
 * only, no profiling. */
typedef enum kiln_strategy {
  KILN_STRATEGY_DEFAULT = 0,
  KILN_STRATEGY_GLOBAL = 1,
  KILN_STRATEGY_LOCAL = 2,
  KILN_STRATEGY_FIXED = 3,
  KILN_STRATEGY_HEURISTIC = 4
} kiln_strategy;

/* accuracy values. STRICT: only convolution algorithms that round like a plain dot product
 * (no Winograd). DEFAULT: every algorithm, then a guard: on a cold load (no stored plan) the
 * plan is run on a random-normal probe input next to the same plan with its Winograd layers on
 * exact algorithms, and Winograd layers are given up, those saving least time first, until the
 * error they add is within 6e-5 of the output's largest value (the probe costs a few runs of
 * the model at load, and only when the plan has Winograd layers). FAST: every algorithm, no
 * guard. Plans are stored in the tuning cache per accuracy mode. */
typedef enum kiln_accuracy {
  KILN_ACCURACY_DEFAULT = 0,
  KILN_ACCURACY_STRICT = 1,
  KILN_ACCURACY_FAST = 2
} kiln_accuracy;

/* precision values. F32: every op in f32 (exact; the default). BF16: convolutions (direct,
 * 1x1, depthwise) and fully connected layers may read their activations and weights rounded
 * to bfloat16 and accumulate in f32, where the CPU has AVX512-BF16 and the solver measures it
 * faster including the conversions; inputs, outputs and every other op stay f32. Each such
 * layer rounds its operands to 8 significant bits. Under accuracy DEFAULT or STRICT a bf16
 * guard bounds what that costs: on a cold load the plan is run on a random-normal probe input
 * next to the model in f32, and bf16 layers go back to f32 (those saving least time per unit
 * of error first) until the outputs differ by at most 2e-2 of their largest value; under FAST
 * every layer the solver finds faster in bf16 keeps it, and outputs move by as much as bf16
 * itself moves them (README, "precision"). On a CPU without AVX512-BF16, BF16 runs as F32.
 * Plans are stored in the tuning cache per precision. */
typedef enum kiln_precision { KILN_PRECISION_F32 = 0, KILN_PRECISION_BF16 = 1 } kiln_precision;

/* Sets struct_size = sizeof(kiln_options) and all fields to their defaults. */
KILN_API kiln_status* kiln_options_init(kiln_options* options);

/* ---- sessions ---------------------------------------------------------------------------- */

/* Load an ONNX model. `options` may be NULL (all defaults). On failure *out_session is set to
 * NULL. Errors: KILN_IO_ERROR (unreadable file), KILN_INVALID_MODEL, KILN_UNSUPPORTED, ...
 * The file is memory-mapped and its large tensors are read in place: while the session lives,
 * replace the file (write a new one and rename it over) rather than rewrite it in place, or
 * the session may read the new bytes. Weights the kernels packed are released after loading;
 * tensors still read at run time (e.g. a constant operand of an Add) keep the mapping. */
KILN_API kiln_status* kiln_session_create_from_file(const char* path, const kiln_options* options,
                                                    kiln_session** out_session);
/* Same from an in-memory ONNX ModelProto. The bytes are not needed after the call returns. */
KILN_API kiln_status* kiln_session_create_from_memory(const void* data, size_t size,
                                                      const kiln_options* options,
                                                      kiln_session** out_session);
/* NULL is allowed (no-op). A handle that was already released (or never created) is ignored,
 * and any other call given one returns KILN_INVALID_ARGUMENT instead of touching freed memory
 * (best effort: a session created later may reuse the same address). */
KILN_API void kiln_session_release(kiln_session* session);

/* Model inputs and outputs, in the model's order (indices 0..count-1). Strings and dims
 * returned by pointer stay valid until the session is released. Shapes are fully static (the
 * batch and any input_shapes are fixed at load; other batches: kiln_session_run_batch), except
 * for outputs whose size each run decides (kiln_session_output_dynamic). An index >= count gives
 * KILN_INVALID_ARGUMENT. */
KILN_API kiln_status* kiln_session_input_count(const kiln_session* session, size_t* out_count);
KILN_API kiln_status* kiln_session_output_count(const kiln_session* session, size_t* out_count);

KILN_API kiln_status* kiln_session_input_name(const kiln_session* session, size_t index,
                                              const char** out_name);
KILN_API kiln_status* kiln_session_output_name(const kiln_session* session, size_t index,
                                               const char** out_name);

KILN_API kiln_status* kiln_session_input_dtype(const kiln_session* session, size_t index,
                                               kiln_dtype* out_dtype);
KILN_API kiln_status* kiln_session_output_dtype(const kiln_session* session, size_t index,
                                                kiln_dtype* out_dtype);

/* *out_dims points at *out_rank dims (never NULL on success, even for a rank-0 scalar). */
KILN_API kiln_status* kiln_session_input_shape(const kiln_session* session, size_t index,
                                               const int64_t** out_dims, size_t* out_rank);
KILN_API kiln_status* kiln_session_output_shape(const kiln_session* session, size_t index,
                                                const int64_t** out_dims, size_t* out_rank);

/* Bytes of the buffer kiln_session_run expects: product(dims) * element size. */
KILN_API kiln_status* kiln_session_input_byte_size(const kiln_session* session, size_t index,
                                                   size_t* out_bytes);
KILN_API kiln_status* kiln_session_output_byte_size(const kiln_session* session, size_t index,
                                                    size_t* out_bytes);

/* Index of the input/output with this name; KILN_INVALID_ARGUMENT if there is none. Lets a
 * caller bind buffers by name. */
KILN_API kiln_status* kiln_session_input_index(const kiln_session* session, const char* name,
                                               size_t* out_index);
KILN_API kiln_status* kiln_session_output_index(const kiln_session* session, const char* name,
                                                size_t* out_index);

/* Instruction set the session's kernels were generated for (after the max_isa cap, the
 * KILN_MAX_ISA environment variable and CPU detection); never KILN_ISA_DEFAULT. */
KILN_API kiln_status* kiln_session_isa(const kiln_session* session, kiln_isa* out_isa);

/* ---- run --------------------------------------------------------------------------------- */

/* Run the model once. inputs[i] / outputs[i] follow the input/output index order; input_count
 * and output_count must equal the model's counts. Each buffer is dense, C-ordered, of the
 * input's/output's dtype, aligned to its element size, and input_bytes[i] / output_bytes[i]
 * must equal kiln_session_input_byte_size / kiln_session_output_byte_size (else
 * KILN_SHAPE_MISMATCH naming the input and the expected size). Input buffers are only read.
 * Output buffers must not overlap inputs or each other. Safe to call concurrently on one
 * session (see the thread-safety note at the top). */
KILN_API kiln_status* kiln_session_run(const kiln_session* session, const void* const* inputs,
                                       const size_t* input_bytes, size_t input_count,
                                       void* const* outputs, const size_t* output_bytes,
                                       size_t output_count);

/* ---- another batch ------------------------------------------------------------------------
 * A session runs the shapes it was loaded with (kiln_session_input_shape) and, through the two
 * functions below, the same shapes with another batch: dim 0 of every input (and of the outputs
 * that follow it) set to `batch`. The first use of a batch plans it: the model is imported and
 * planned again with the session's options (as a load at batch_size = batch would be, except
 * that the environment is not read again; the tuning cache is keyed by shape, so this is cheap
 * the second time on a machine), which costs about a load (ResNet-50, batch 1 -> 4: see
 * bench/NOTES.md). That plan is kept with the session (up to 8 other batches; beyond that the
 * least recently used is dropped and planned again on its next use), and uses its own memory
 * (packed weights, code) as another session would. A session created from memory keeps a copy of
 * the model's bytes for this. Both functions are safe to call concurrently with runs of any
 * batch: a batch being planned holds up only the callers waiting for that batch. Passing the
 * session's own batch is the same as the plain functions. Errors: KILN_INVALID_ARGUMENT for a
 * batch outside 1..2^20 or a session without inputs of rank >= 1; any load error the new batch
 * raises (e.g. KILN_SHAPE_MISMATCH when a Reshape to a constant shape fixes the batch). */

/* The shape of output `index` at `batch`: writes *out_rank dims (the rank of
 * kiln_session_output_shape) into dims[0..capacity). capacity smaller than the rank:
 * KILN_INVALID_ARGUMENT (nothing written). Plans the batch if needed. */
KILN_API kiln_status* kiln_session_output_shape_for_batch(const kiln_session* session,
                                                          int64_t batch, size_t index,
                                                          int64_t* dims, size_t capacity,
                                                          size_t* out_rank);

/* kiln_session_run at `batch`: every buffer holds the shape of the session's input/output with
 * dim 0 = batch (kiln_session_output_shape_for_batch); byte sizes are checked against those
 * shapes. Plans the batch on its first use. */
KILN_API kiln_status* kiln_session_run_batch(const kiln_session* session, int64_t batch,
                                             const void* const* inputs, const size_t* input_bytes,
                                             size_t input_count, void* const* outputs,
                                             const size_t* output_bytes, size_t output_count);

/* ---- outputs whose size each run decides (0.3.0) ------------------------------------------
 * In a model with NonMaxSuppression, NonZero, Unique or an If on a computed condition (a detector
 * with its box selection in the graph), the sizes of what follows depend on the data. Kiln plans
 * the rest as usual and computes those nodes per run on its reference kernels (README, "Outputs
 * whose size each run decides"). Such outputs are "dynamic": kiln_session_output_dynamic says
 * which; kiln_session_output_shape gives the dims the model declares for them, -1 where each run
 * decides (rank 0 when the model declares none); kiln_session_output_byte_size, kiln_session_run
 * and kiln_session_run_batch refuse them (KILN_INVALID_ARGUMENT). kiln_session_run_outputs runs
 * any model, dynamic or not, into outputs Kiln allocates. */
typedef struct kiln_outputs kiln_outputs;

/* *out_dynamic = 1 when output `index`'s shape is decided by each run, else 0. */
KILN_API kiln_status* kiln_session_output_dynamic(const kiln_session* session, size_t index,
                                                  int32_t* out_dynamic);

/* Runs the model once at the session's shapes (inputs as for kiln_session_run) and returns the
 * outputs in *out_outputs, which the caller frees with kiln_outputs_release (also after other
 * calls on the session, or its release). Safe to call concurrently on one session. */
KILN_API kiln_status* kiln_session_run_outputs(const kiln_session* session,
                                               const void* const* inputs, const size_t* input_bytes,
                                               size_t input_count, kiln_outputs** out_outputs);

/* Output `index` of a run: *out_data points at its dense, C-ordered elements (of the dtype
 * kiln_session_output_dtype gives; NULL or not when it has none), *out_dims at its *out_rank
 * dims. Both stay valid until kiln_outputs_release. */
KILN_API kiln_status* kiln_outputs_get(const kiln_outputs* outputs, size_t index,
                                       const void** out_data, const int64_t** out_dims,
                                       size_t* out_rank);

/* Frees the outputs of a run. NULL is a no-op. */
KILN_API void kiln_outputs_release(kiln_outputs* outputs);

/* ---- reports (0.2.0) --------------------------------------------------------------------- */

/* The session's plan as JSON (UTF-8): what `kiln plan` prints. An object with the selection's
 * summary ("isa", "threads", "strategy", "tune", "accuracy", "predicted_ms", "optimal",
 * "plan_from_cache", "measurements", "conversions", "load_ms": {...}, ...), "tail" (the nodes
 * run per run after the plan, {"nodes", "first"}, or null) and "steps": one
 * object per step of the plan in run order ("step", "node", "op", "label", "family",
 * "layouts", "pred_ms", "source", "kernel"; op "(convert)" for an inserted layout conversion).
 * The string is owned by the session and valid until it is released. */
KILN_API kiln_status* kiln_session_plan_json(const kiln_session* session, const char** out_json);

/* Runs the model `runs` times (1..100000) on random normal inputs (fixed seed; int64 inputs
 * zero) with every plan step timed, and returns as JSON {"runs", "total_ms", "reference_ms",
 * "tail_ms" (the run-time tail's median, in both totals),
 * "layers": [{"step", "node", "op", "kernel", "layouts", "ms", "gflop_per_s", "tiles",
 * "reference"},
 * ...]}: each step's median time (what `kiln bench --layers` reports). Safe to call while other
 * threads run the session. *out_json is allocated for the caller: free it with
 * kiln_string_release. */
KILN_API kiln_status* kiln_session_profile_json(const kiln_session* session, int32_t runs,
                                                char** out_json);

/* This machine and build as JSON: {"cpu" (brand string), "vendor", "family", "model",
 * "stepping", "isa" (best detected), "features" (reduced-precision units), "cores" (CPUs this
 * process may run on), "cache": {"l1d", "l2", "l3", "reported"}, "kiln_version", "build_id"}.
 * A static string. */
KILN_API const char* kiln_machine_json(void);

/* Frees a string Kiln allocated for the caller (kiln_session_profile_json). NULL is a no-op. */
KILN_API void kiln_string_release(char* str);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* KILN_KILN_H_ */
