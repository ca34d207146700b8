"""A deterministic multilingual test corpus for the tokenizer parity tests and benchmark.

lines(seed, count) returns `count` strings mixing English prose (contractions in both cases,
numbers), Chinese, Japanese, Cyrillic, Arabic, Devanagari, source code (tabs, indentation,
newlines inside a string), emoji (ZWJ sequences, flags, skin tones), runs of whitespace (spaces,
tabs, CR/LF, NBSP, ideographic space, NEL), decomposed accents (NFC changes them), fullwidth and
superscript digits, and the special-token strings of the three families written as plain text.
Same seed, same lines, on every machine (only Python's `random` with a fixed seed).
"""
import random

ENGLISH = (
    "the quick brown fox jumps over lazy dog and it was a bright cold day in April clocks were "
    "striking thirteen model training data offload memory GPU tensor gradient optimizer state "
    "checkpoint shard disk bandwidth latency throughput Hello World I you we they she he"
).split()
CONTRACTIONS = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'RE", "'Ve", "'LL", "'D", "’s"]
CHINESE = (
    "的一是不了人我在有他这为之大来以个中上们到说国和地也子时道出而要于就下得可你年生自会那后能对着事其里所去行过家十用发天如然"
    "作方成者多日都三小军二无同么经法当起与好看学进种将还分此心前面又定见只主没公从知全部工长开现实向把问社最"
    "模型训练数据内存显卡梯度优化器状态检查点分片磁盘带宽延迟吞吐量深度学习大语言"
)
PUNCT_ZH = "，。！？、；：“”（）《》"
OTHER_SCRIPTS = [
    "Привет, как дела? Это тест токенизатора.",
    "مرحبا بالعالم، هذا اختبار",
    "नमस्ते दुनिया, यह एक परीक्षण है।",
    "こんにちは世界、これはテストです。カタカナとひらがな。",
    "Ελληνικά γράμματα και αριθμοί 123",
    "한국어 문장입니다. 안녕하세요!",
    "ภาษาไทยไม่มีช่องว่างระหว่างคำ",
]
EMOJI = ["😀", "🚀", "👨‍👩‍👧‍👦", "🇫🇷", "🇯🇵", "👍🏽", "❤️", "🤖", "🧠", "✨", "🔥", "🏳️‍🌈", "☕", "1️⃣"]
WHITESPACE = [" ", "  ", "   ", "    ", "\t", "\t\t", "\n", "\n\n", "\r\n", " \n ", "\u00a0", "\u3000",
              "\u2003", "\u0085", " \t ", "\n    ", "\u200b"]
DECOMPOSED = ["e\u0301", "a\u0308", "n\u0303", "\u212b", "o\u0302\u0323", "\u1100\u1161\u11a8", "\u2126",
              "café", "naïve", "Ångström", "ﬁ"]
NUMBERS = ["0", "7", "42", "1234", "1234567", "3.14159", "2024-06-01", "１２３", "²", "½", "٣", "१२"]
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|begin_of_text|>", "<|eot_id|>", "<s>", "</s>",
            "<unk>", "<|endoftext", "<s ", "▁"]
CODE = [
    'def f(x):\n\treturn x ** 2  # square\n',
    'for (int i = 0; i < n; ++i) {\n    sum += a[i];\n}\n',
    'print("line one\\nline two")\n',
    's = "tab\there\n  and a newline inside"',
    'if x == None:\n        raise ValueError(f"bad {x!r}")\n\n',
    'std::vector<uint32_t> ids; ids.push_back(0x1F);',
    '{"key": [1, 2, 3], "nested": {"a": null}}',
    '#include <cstdio>\nint main() { return 0; }\n',
    '    \t  mixed indentation\t\n',
    'SELECT * FROM t WHERE id IN (1,2,3);  -- comment',
]


def _english(rng):
    words = []
    for _ in range(rng.randint(3, 25)):
        w = rng.choice(ENGLISH)
        r = rng.random()
        if r < 0.1:
            w = w.capitalize()
        elif r < 0.13:
            w = w.upper()
        if rng.random() < 0.08:
            w += rng.choice(CONTRACTIONS)
        if rng.random() < 0.08:
            w += rng.choice([",", ".", "!", "?", ";", ":", "...", "—"])
        words.append(w)
    return " ".join(words)


def _chinese(rng):
    return "".join(rng.choice(CHINESE) if rng.random() > 0.1 else rng.choice(PUNCT_ZH)
                   for _ in range(rng.randint(2, 40)))


def _piece(rng):
    kind = rng.random()
    if kind < 0.30:
        return _english(rng)
    if kind < 0.45:
        return _chinese(rng)
    if kind < 0.57:
        return rng.choice(CODE)
    if kind < 0.64:
        return rng.choice(OTHER_SCRIPTS)
    if kind < 0.72:
        return "".join(rng.choice(EMOJI) for _ in range(rng.randint(1, 4)))
    if kind < 0.80:
        return rng.choice(WHITESPACE) * rng.randint(1, 3)
    if kind < 0.86:
        return rng.choice(DECOMPOSED)
    if kind < 0.94:
        return rng.choice(NUMBERS)
    return rng.choice(SPECIALS)


def line(rng):
    """One corpus line: 1-6 pieces joined by a space, a whitespace run or nothing."""
    parts = [_piece(rng) for _ in range(rng.randint(1, 6))]
    out = parts[0]
    for p in parts[1:]:
        out += rng.choice([" ", " ", "", "\n", "  ", "\t"]) + p
    return out


def lines(seed, count):
    rng = random.Random(seed)
    return [line(rng) for _ in range(count)]
