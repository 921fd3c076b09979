"""``email.send`` over SMTP (smtplib in a worker thread). High risk: gated by approval."""

from __future__ import annotations

import asyncio
import smtplib
import ssl
from email.message import EmailMessage
from email.utils import formataddr, formatdate, getaddresses, make_msgid, parseaddr
from typing import Annotated

from typing_extensions import TypedDict

from sophon_dsl.model import Risk
from sophon_dsl.tools import ToolSpec

from ._common import Field, make_tool
from .config import StdlibConfig, uses_config
from .errors import ToolError

__all__ = ["build", "SendReceipt"]

MAX_RECIPIENTS = 100

Addresses = Annotated[str | list[str], Field(description="one address or a list")]


class SendReceipt(TypedDict):
    message_id: str
    accepted: list[str]
    refused: list[str]


def _addresses(value: str | list[str] | None, field: str) -> list[str]:
    if value is None:
        return []
    items = [value] if isinstance(value, str) else list(value)
    out = []
    for item in items:
        text = str(item)
        if "\r" in text or "\n" in text:
            raise ToolError("Email.InvalidAddress", f"{field}: line breaks are not allowed")
        for _name, addr in getaddresses([text]):
            if not addr or "@" not in addr or addr.startswith("@") or addr.endswith("@"):
                raise ToolError("Email.InvalidAddress", f"{field}: {text!r} is not an email address")
            out.append(addr)
    return out


def _check_headers(msg: EmailMessage) -> None:
    """Refuse a header whose value, as the message holds it, has a line break or another
    control character.  The subject is checked for raw line breaks before this, but an
    RFC 2047 encoded word (``=?utf-8?q?hi=0D=0AReply-To:...?=``) is decoded when the header
    is set and would be written back as new header lines, or a new body."""
    for name, value in msg.items():
        text = str(value)
        bad = next((ch for ch in text if (ord(ch) < 32 and ch != "\t") or 0x7F <= ord(ch) < 0xA0), None)
        if bad is not None:
            raise ToolError("Email.InvalidHeader", f"{name}: the value holds the control character "
                            f"U+{ord(bad):04X} once decoded (encoded words included): refused")


@uses_config("smtp_host", "smtp_port", "smtp_user", "smtp_password", "smtp_sender", "smtp_starttls", "smtp_ssl",
             "smtp_timeout")
def build(config: StdlibConfig) -> list[ToolSpec]:
    def _send_sync(msg: EmailMessage, sender: str, rcpts: list[str]) -> dict[str, tuple[int, bytes]]:
        host = config.smtp_host
        assert host is not None
        ctx = ssl.create_default_context()
        try:
            if config.smtp_ssl:
                smtp: smtplib.SMTP = smtplib.SMTP_SSL(host, config.smtp_port,
                                                      timeout=config.smtp_timeout, context=ctx)
            else:
                smtp = smtplib.SMTP(host, config.smtp_port, timeout=config.smtp_timeout)
            with smtp:
                smtp.ehlo()
                if not config.smtp_ssl:
                    want = config.smtp_starttls
                    if want or (want is None and smtp.has_extn("starttls")):
                        smtp.starttls(context=ctx)
                        smtp.ehlo()
                if config.smtp_user:
                    smtp.login(config.smtp_user, config.smtp_password or "")
                return smtp.send_message(msg, from_addr=sender, to_addrs=rcpts)
        except smtplib.SMTPRecipientsRefused as exc:
            raise ToolError("Email.RecipientsRefused",
                            f"every recipient was refused: {', '.join(exc.recipients)}") from None
        except smtplib.SMTPAuthenticationError as exc:
            raise ToolError("Email.AuthFailed", f"SMTP login failed: {exc.smtp_code}") from None
        except smtplib.SMTPException as exc:
            raise ToolError("Email.SmtpError", f"SMTP error: {exc}") from None
        except (OSError, ssl.SSLError) as exc:
            raise ToolError("Email.ConnectionError",
                            f"cannot reach SMTP server {host}:{config.smtp_port}: {exc}") from None

    async def send(to: Addresses, subject: Annotated[str, Field(max_length=998)],
                   body: Annotated[str, Field(description="plain-text body")],
                   cc: Addresses | None = None, bcc: Addresses | None = None,
                   html: Annotated[str | None, Field(description="optional HTML alternative")] = None,
                   reply_to: str | None = None) -> SendReceipt:
        if not config.smtp_host:
            raise ToolError("Email.NotConfigured", "no SMTP server configured (smtp_host)")
        sender = config.smtp_sender or config.smtp_user
        if not sender or "@" not in parseaddr(sender)[1]:
            raise ToolError("Email.NotConfigured", "no sender address configured (smtp_sender)")
        to_l, cc_l, bcc_l = _addresses(to, "to"), _addresses(cc, "cc"), _addresses(bcc, "bcc")
        if not to_l:
            raise ToolError("Email.InvalidAddress", "no recipient")
        rcpts = list(dict.fromkeys(to_l + cc_l + bcc_l))
        if len(rcpts) > MAX_RECIPIENTS:
            raise ToolError("Email.TooManyRecipients", f"at most {MAX_RECIPIENTS} recipients")
        if "\r" in subject or "\n" in subject:
            raise ToolError("Email.InvalidHeader", "line breaks are not allowed in the subject")
        msg = EmailMessage()
        msg["From"] = sender
        msg["To"] = ", ".join(to_l)
        if cc_l:
            msg["Cc"] = ", ".join(cc_l)
        if reply_to:
            msg["Reply-To"] = formataddr(("", _addresses(reply_to, "reply_to")[0]))
        msg["Subject"] = subject
        msg["Date"] = formatdate(localtime=True)  # RFC 5322 requires it; some servers refuse mail without
        domain = parseaddr(sender)[1].rsplit("@", 1)[-1]
        msg["Message-ID"] = make_msgid(domain=domain)
        _check_headers(msg)
        msg.set_content(body)
        if html:
            msg.add_alternative(html, subtype="html")
        refused = await asyncio.to_thread(_send_sync, msg, parseaddr(sender)[1], rcpts)
        return SendReceipt(message_id=str(msg["Message-ID"]),
                           accepted=[r for r in rcpts if r not in refused], refused=sorted(refused))

    return [make_tool(send, "email.send", Risk.HIGH,
                      "Send an email (plain text, optional HTML) through the configured SMTP server. "
                      "High risk: the runtime asks for approval first.")]
