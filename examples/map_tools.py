"""Tools for the map examples (examples/map.plan, .json, .yaml): stand-ins that need no network."""

from sophon_dsl import tool


@tool
def search(query: str, limit: int = 3) -> list[dict]:
    """Search the web: the hits' titles and urls."""
    return [{"title": f"{query} #{k}", "url": f"https://example.com/{query.replace(' ', '-')}/{k}"}
            for k in range(1, limit + 1)]


@tool
def fetch(url: str) -> dict:
    """Fetch a page: its text."""
    if url.endswith("/2"):
        raise ConnectionError(f"{url} timed out")
    return {"url": url, "text": f"The page at {url} says hello."}


@tool
def translate(text: str, lang: str) -> str:
    """Translate a text."""
    return f"[{lang}] {text}"


@tool
def summarize(texts: list) -> str:
    """Summarize texts in one line."""
    return f"{len(texts)} texts: " + " | ".join(str(t)[:40] for t in texts)
