"""Tracker markup to the plain text the index reads.

Jira Cloud sends descriptions as Atlassian Document Format (a JSON tree),
Jira Data Center as wiki markup. Both become plain text that keeps every
line of a code or noformat block as it was (a stack trace stays one frame
a line, which is how people paste and search it), lists as "- item"
lines, and links as their text and address. Formatting marks are dropped.
"""

import re

# Nodes whose children are blocks: each child on lines of its own.
_BLOCKS = {"doc", "blockquote", "panel", "expand", "nestedExpand", "layoutSection", "layoutColumn", "bodiedExtension"}


def adf_to_text(node) -> str:
    """Plain text of an ADF document (or any node of one); a string is returned as it is."""
    if node is None:
        return ""
    if isinstance(node, str):
        return node
    return _tidy(_adf(node, depth=0))


def _adf(node: dict, depth: int) -> str:
    kind = node.get("type")
    content = node.get("content") or []
    attrs = node.get("attrs") or {}
    match kind:
        case "text":
            text = node.get("text", "")
            for mark in node.get("marks") or []:
                href = (mark.get("attrs") or {}).get("href")
                if mark.get("type") == "link" and href and href != text:
                    text = f"{text} ({href})"
            return text
        case "hardBreak":
            return "\n"
        case "mention":
            return attrs.get("text") or "@" + str(attrs.get("id", ""))
        case "emoji":
            return attrs.get("text") or attrs.get("shortName", "")
        case "inlineCard" | "blockCard" | "embedCard":
            return attrs.get("url", "")
        case "date":
            return str(attrs.get("timestamp", ""))
        case "status":
            return attrs.get("text", "")
        case "codeBlock":
            # The code's own lines, untouched: no tidying inside.
            return "\n" + "".join(_adf(child, depth) for child in content) + "\n"
        case "paragraph" | "heading":
            return "\n" + "".join(_adf(child, depth) for child in content) + "\n"
        case "bulletList" | "orderedList":
            lines = []
            for number, item in enumerate(content, start=attrs.get("order", 1)):
                marker = f"{number}." if kind == "orderedList" else "-"
                text = "".join(_adf(child, depth + 1) for child in item.get("content") or []).strip("\n")
                first, *rest = text.split("\n") or [""]
                lines.append("  " * depth + f"{marker} {first}")
                lines.extend(rest)
            return "\n" + "\n".join(lines) + "\n"
        case "table":
            return "\n" + "\n".join(_adf(row, depth) for row in content) + "\n"
        case "tableRow":
            return " | ".join(" ".join(_adf(cell, depth).split()) for cell in content)
        case "rule":
            return "\n"
        case "media" | "mediaSingle" | "mediaGroup" | "mediaInline":
            names = [_adf(child, depth) for child in content] if content else [attrs.get("alt", "")]
            return " ".join(name for name in names if name)
        case _:
            inner = "".join(_adf(child, depth) for child in content)
            return f"\n{inner}\n" if kind in _BLOCKS else inner


def _tidy(text: str) -> str:
    # At most one blank line between blocks, none at the ends.
    return re.sub(r"\n{3,}", "\n\n", text).strip("\n")


_CODE = re.compile(r"\{(code|noformat)(?::[^}]*)?\}(.*?)\{\1\}", re.S)
_PLACEHOLDER = "\x00code{}\x00"


def wiki_to_text(markup: str | None) -> str:
    """Plain text of Jira wiki markup. Code and noformat blocks are kept line by line."""
    if not markup:
        return ""
    blocks: list[str] = []

    def keep(match: re.Match) -> str:
        blocks.append(match.group(2).strip("\n"))
        return "\n" + _PLACEHOLDER.format(len(blocks) - 1) + "\n"

    text = _CODE.sub(keep, markup.replace("\r\n", "\n"))
    text = re.sub(r"\{quote\}|\{panel(?::[^}]*)?\}|\{color(?::[^}]*)?\}", "", text)
    text = re.sub(r"^h[1-6]\.\s*", "", text, flags=re.M)
    text = re.sub(r"^bq\.\s*", "", text, flags=re.M)
    text = re.sub(r"^([*#-]+)\s+", lambda m: "  " * (len(m.group(1)) - 1) + "- ", text, flags=re.M)
    text = re.sub(r"\[([^|\]]+)\|([^\]]+)\]", r"\1 (\2)", text)  # [text|url]
    text = re.sub(r"\[(https?://[^\]]+)\]", r"\1", text)
    text = re.sub(r"\[~([^\]]+)\]", r"@\1", text)  # [~user]
    text = re.sub(r"!([^!\s|]+)(?:\|[^!]*)?!", r"\1", text)  # !image.png|thumbnail!
    text = re.sub(r"\|\|", " | ", text)
    # *bold*, _italic_, -strike-, +under+, ^sup^, ~sub~, {{mono}}: the words only.
    text = re.sub(r"\{\{(.+?)\}\}", r"\1", text)
    text = re.sub(r"(?<![\w*])\*(\S(?:.*?\S)?)\*(?![\w*])", r"\1", text)
    text = re.sub(r"(?<![\w_])_(\S(?:.*?\S)?)_(?![\w_])", r"\1", text)
    text = re.sub(r"(?<![\w+])\+(\S(?:.*?\S)?)\+(?![\w+])", r"\1", text)
    for number, block in enumerate(blocks):
        text = text.replace(_PLACEHOLDER.format(number), block)
    return _tidy(text)
