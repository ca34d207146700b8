// A pickle reader that never executes anything: it turns the opcodes of protocols 2-5 (and the
// binary opcodes of 0/1) into inert PyValues. torch.save writes protocol 2.
//
// Understood natively: None/bool/int (to 64 bits)/float/str/bytes, tuple, list, dict,
// collections.OrderedDict with the attributes BUILD gives it (a torch state_dict's _metadata),
// set/frozenset (EMPTY_SET/ADDITEMS/FROZENSET and builtins.set(list)), _codecs.encode(str,
// 'latin1') (protocol 2's bytes), memo (PUT/BINPUT/LONG_BINPUT/MEMOIZE, GET forms), MARK, FRAME,
// persistent ids. Any other global call becomes an opaque kObject keeping
// its callable, arguments and BUILD state. Refused, with the source name and byte offset:
// unknown opcodes, protocol-0 quoted strings, the extension registry, out-of-band buffers,
// integers wider than 64 bits, stack or memo misuse, and truncation.
#pragma once

#include <cstddef>
#include <span>
#include <string>

#include "checkpoint/torch_format/internal/pickle_value.h"
#include "common/common.h"

namespace tierzero::checkpoint {

// Parses `bytes` as one pickle. `source` names it in errors (e.g. "/ckpt/x.pt: archive/data.pkl");
// `base_offset` is added to byte offsets in messages (the pickle's position in its file).
// Returns the document, or kCorrupt / kUnsupported "SOURCE: byte N (file offset M): what".
Result<PickleDocument> parse_pickle(std::span<const std::byte> bytes, const std::string& source,
                                    uint64_t base_offset = 0);

}  // namespace tierzero::checkpoint
