"""Tools for the seed's worked example (calendar, Confluence, email, Jira), with canned data
so the goal runs offline: `sophon-dsl goal ... --tools examples/goals/meeting_tools.py`."""

from sophon_dsl import tool


@tool(name="calendar.list")
def calendar_list(day: str) -> list[dict]:
    """List the meetings of a day ("tomorrow" or YYYY-MM-DD)."""
    return [{"title": "Quarterly report review", "at": "10:00"}, {"title": "Roadmap sync", "at": "14:00"}]


@tool(name="confluence.search")
def confluence_search(query: str) -> list[dict]:
    """Search Confluence pages."""
    return [{"title": "Q3 report", "url": "https://wiki.example/q3"}]


@tool(name="email.draft", risk="medium")
def email_draft(meetings: list[dict], pages: list[dict]) -> list[str]:
    """Draft one preparation email per meeting, with links to the relevant pages."""
    links = ", ".join(p["url"] for p in pages)
    return [f"Prep for {m['title']} at {m['at']}: see {links}" for m in meetings]


@tool(name="jira.create_issue", risk="medium")
def jira_create_issue(title: str) -> dict:
    """Create a Jira ticket."""
    return {"key": "OPS-42", "title": title}
