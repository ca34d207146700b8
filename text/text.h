// tierzero_text, the one header other components include: Hugging Face tokenizer.json tokenizers
// (internal/tokenizer.h: byte-level BPE and SentencePiece-style BPE) and the dataset readers that
// turn {"text"} / {"prompt","completion"} / {"messages"} (chat: internal/chat_rows.h) JSONL rows into
// packed token ids (internal/dataset.h).
#pragma once

#include "text/internal/chat_rows.h"
#include "text/internal/dataset.h"
#include "text/internal/masked_text.h"
#include "text/internal/tokenizer.h"
