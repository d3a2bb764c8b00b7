"""Real DOCX, ODT and EPUB files for the tests, written the way their formats lay them out (a zip of
XML parts), small enough to read in an assertion. Also the hostile ones: zip bombs, entity
expansion, external entities, a zip of something else. This module holds no tests."""

from __future__ import annotations

import io
import zipfile
from collections.abc import Sequence

W_NS = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
DOCX_CONTENT_TYPES = (
    '<?xml version="1.0" encoding="UTF-8"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/'
    'content-types"><Default Extension="xml" ContentType="application/xml"/><Override PartName="/word/'
    'document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/>'
    "</Types>")
DOCX_STYLES = (
    f'<w:styles xmlns:w="{W_NS}">'
    '<w:style w:type="paragraph" w:styleId="Title"><w:name w:val="Title"/></w:style>'
    '<w:style w:type="paragraph" w:styleId="Heading1"><w:name w:val="heading 1"/></w:style>'
    '<w:style w:type="paragraph" w:styleId="Heading2"><w:name w:val="heading 2"/></w:style>'
    '<w:style w:type="paragraph" w:styleId="Berschrift3"><w:name w:val="heading 3"/></w:style>'
    '<w:style w:type="paragraph" w:styleId="MyChapter"><w:name w:val="My Chapter"/><w:basedOn w:val="Heading1"/>'
    "</w:style>"
    '<w:style w:type="paragraph" w:styleId="SourceCode"><w:name w:val="Source Code"/></w:style>'
    '<w:style w:type="paragraph" w:styleId="ListBullet"><w:name w:val="List Bullet"/><w:pPr><w:numPr>'
    '<w:numId w:val="1"/></w:numPr></w:pPr></w:style>'
    "</w:styles>")
DOCX_NUMBERING = (
    f'<w:numbering xmlns:w="{W_NS}">'
    '<w:abstractNum w:abstractNumId="0"><w:lvl w:ilvl="0"><w:numFmt w:val="bullet"/></w:lvl>'
    '<w:lvl w:ilvl="1"><w:numFmt w:val="bullet"/></w:lvl></w:abstractNum>'
    '<w:abstractNum w:abstractNumId="1"><w:lvl w:ilvl="0"><w:numFmt w:val="decimal"/></w:lvl></w:abstractNum>'
    '<w:num w:numId="1"><w:abstractNumId w:val="0"/></w:num><w:num w:numId="2"><w:abstractNumId w:val="1"/></w:num>'
    "</w:numbering>")


def zip_bytes(members: Sequence[tuple[str, bytes | str]], *, stored_first: bool = False) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for index, (name, data) in enumerate(members):
            kind = zipfile.ZIP_STORED if stored_first and index == 0 else zipfile.ZIP_DEFLATED
            archive.writestr(name, data.encode("utf-8") if isinstance(data, str) else data, compress_type=kind)
    return buffer.getvalue()


def w_p(text: str = "", *, style: str | None = None, num: tuple[int, int] | None = None, runs: str | None = None) -> str:
    """One `w:p`: a style, numbering (numId, level), and either plain text or raw run XML."""
    properties = ""
    if style or num:
        properties = "<w:pPr>" + (f'<w:pStyle w:val="{style}"/>' if style else "") + (
            f'<w:numPr><w:ilvl w:val="{num[1]}"/><w:numId w:val="{num[0]}"/></w:numPr>' if num else "") + "</w:pPr>"
    content = runs if runs is not None else f'<w:r><w:t xml:space="preserve">{text}</w:t></w:r>'
    return f"<w:p>{properties}{content}</w:p>"


def docx_bytes(body: str, *, footnotes: str = "", title: str | None = None, creators: Sequence[str] = (),
               document_prefix: str = "") -> bytes:
    """A DOCX whose `word/document.xml` body is `body` (WordprocessingML paragraphs and tables)."""
    namespaces = (f'xmlns:w="{W_NS}" xmlns:mc="http://schemas.openxmlformats.org/markup-compatibility/2006" '
                  'xmlns:wps="http://schemas.microsoft.com/office/word/2010/wordprocessingShape" '
                  'xmlns:v="urn:schemas-microsoft-com:vml"')
    members: list[tuple[str, bytes | str]] = [
        ("[Content_Types].xml", DOCX_CONTENT_TYPES),
        ("word/document.xml", f'{document_prefix}<w:document {namespaces}><w:body>{body}</w:body></w:document>'),
        ("word/styles.xml", DOCX_STYLES),
        ("word/numbering.xml", DOCX_NUMBERING),
    ]
    if footnotes:
        members.append(("word/footnotes.xml", f'<w:footnotes xmlns:w="{W_NS}">{footnotes}</w:footnotes>'))
    if title is not None or creators:
        members.append(("docProps/core.xml", '<cp:coreProperties xmlns:cp="http://schemas.openxmlformats.org/'
                        'package/2006/metadata/core-properties" xmlns:dc="http://purl.org/dc/elements/1.1/">'
                        + (f"<dc:title>{title}</dc:title>" if title else "")
                        + "".join(f"<dc:creator>{name}</dc:creator>" for name in creators)
                        + "</cp:coreProperties>"))
    return zip_bytes(members)


ODT_NS = ('xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
          'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" '
          'xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" '
          'xmlns:style="urn:oasis:names:tc:opendocument:xmlns:style:1.0" '
          'xmlns:draw="urn:oasis:names:tc:opendocument:xmlns:drawing:1.0" '
          'xmlns:dc="http://purl.org/dc/elements/1.1/" '
          'xmlns:meta="urn:oasis:names:tc:opendocument:xmlns:meta:1.0"')
ODT_STYLES = ('<office:automatic-styles>'
              '<style:style style:name="P1" style:family="paragraph" style:parent-style-name="Preformatted_20_Text"/>'
              '<text:list-style style:name="L1"><text:list-level-style-number text:level="1" style:num-format="1"/>'
              "</text:list-style>"
              '<text:list-style style:name="L2"><text:list-level-style-bullet text:level="1" text:bullet-char="•"/>'
              '<text:list-level-style-bullet text:level="2" text:bullet-char="•"/></text:list-style>'
              "</office:automatic-styles>")


def odt_bytes(body: str, *, title: str | None = None, creator: str | None = None,
              mimetype: str = "application/vnd.oasis.opendocument.text") -> bytes:
    content = (f'<office:document-content {ODT_NS}>{ODT_STYLES}<office:body><office:text>{body}'
               "</office:text></office:body></office:document-content>")
    members: list[tuple[str, bytes | str]] = [("mimetype", mimetype), ("content.xml", content)]
    if title is not None or creator is not None:
        members.append(("meta.xml", f'<office:document-meta {ODT_NS}><office:meta>'
                        + (f"<dc:title>{title}</dc:title>" if title else "")
                        + (f"<meta:initial-creator>{creator}</meta:initial-creator>" if creator else "")
                        + "</office:meta></office:document-meta>"))
    return zip_bytes(members, stored_first=True)


def xhtml(title: str, body: str) -> str:
    return ('<?xml version="1.0" encoding="utf-8"?><!DOCTYPE html><html xmlns="http://www.w3.org/1999/xhtml" '
            f'xmlns:epub="http://www.idpf.org/2007/ops"><head><title>{title}</title></head><body>{body}</body></html>')


def epub_bytes(chapters: Sequence[tuple[str, str, str]], *, title: str = "A Book", creators: Sequence[str] = (),
               nav: bool = True, ncx: bool = False) -> bytes:
    """An EPUB of `chapters` (file name, table-of-contents title, XHTML body), in spine order."""
    manifest = "".join(f'<item id="c{index}" href="text/{name}" media-type="application/xhtml+xml"/>'
                       for index, (name, _toc, _body) in enumerate(chapters))
    spine = "".join(f'<itemref idref="c{index}"/>' for index in range(len(chapters)))
    members: list[tuple[str, bytes | str]] = [
        ("mimetype", "application/epub+zip"),
        ("META-INF/container.xml", '<?xml version="1.0"?><container version="1.0" xmlns="urn:oasis:names:tc:'
         'opendocument:xmlns:container"><rootfiles><rootfile full-path="OEBPS/content.opf" media-type="'
         'application/oebps-package+xml"/></rootfiles></container>'),
    ]
    toc_items = "".join(f'<li><a href="text/{name}">{toc}</a></li>' for name, toc, _ in chapters)
    extra_manifest = ""
    if nav:
        extra_manifest += '<item id="nav" href="nav.xhtml" media-type="application/xhtml+xml" properties="nav"/>'
        members.append(("OEBPS/nav.xhtml", xhtml("Contents", f'<nav epub:type="toc"><h1>Contents</h1><ol>'
                                                             f"{toc_items}</ol></nav>")))
        spine = '<itemref idref="nav" linear="no"/>' + spine
    spine_attributes = ""
    if ncx:
        extra_manifest += '<item id="ncx" href="toc.ncx" media-type="application/x-dtbncx+xml"/>'
        spine_attributes = ' toc="ncx"'
        points = "".join(f'<navPoint id="n{index}"><navLabel><text>{toc}</text></navLabel><content '
                         f'src="text/{name}"/></navPoint>' for index, (name, toc, _) in enumerate(chapters))
        members.append(("OEBPS/toc.ncx", '<?xml version="1.0"?><!DOCTYPE ncx PUBLIC "-//NISO//DTD ncx 2005-1//EN" '
                        '"http://www.daisy.org/z3986/2005/ncx-2005-1.dtd"><ncx xmlns="http://www.daisy.org/z3986/'
                        f'2005/ncx/" version="2005-1"><navMap>{points}</navMap></ncx>'))
    members.append(("OEBPS/content.opf", '<?xml version="1.0"?><package xmlns="http://www.idpf.org/2007/opf" '
                    'version="3.0"><metadata xmlns:dc="http://purl.org/dc/elements/1.1/">'
                    f"<dc:title>{title}</dc:title>" + "".join(f"<dc:creator>{name}</dc:creator>" for name in creators)
                    + f"</metadata><manifest>{extra_manifest}{manifest}</manifest><spine{spine_attributes}>{spine}"
                    "</spine></package>"))
    members.extend((f"OEBPS/text/{name}", xhtml(toc, body)) for name, toc, body in chapters)
    return zip_bytes(members, stored_first=True)


BILLION_LAUGHS = ('<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">'
                  '<!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">'
                  '<!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">'
                  '<!ENTITY lol4 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">'
                  '<!ENTITY lol5 "&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;">'
                  '<!ENTITY lol6 "&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;">'
                  '<!ENTITY lol7 "&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;">'
                  '<!ENTITY lol8 "&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;">'
                  '<!ENTITY lol9 "&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;">]>')


def billion_laughs_docx() -> bytes:
    body = '<w:p><w:r><w:t>&lol9;</w:t></w:r></w:p>'
    return docx_bytes(body, document_prefix=BILLION_LAUGHS)


def xxe_docx(secret_path: str) -> bytes:
    prefix = f'<?xml version="1.0"?><!DOCTYPE d [<!ENTITY xxe SYSTEM "file://{secret_path}">]>'
    return docx_bytes('<w:p><w:r><w:t>&xxe;</w:t></w:r></w:p>', document_prefix=prefix)


def zip_bomb_docx(expanded_bytes: int) -> bytes:
    """A DOCX whose document part is `expanded_bytes` of one repeated character: a ratio of ~1000."""
    filler = " " * expanded_bytes
    return zip_bytes([("[Content_Types].xml", DOCX_CONTENT_TYPES),
                      ("word/document.xml", f'<w:document xmlns:w="{W_NS}"><w:body><w:p><w:r><w:t>bomb{filler}'
                                            "</w:t></w:r></w:p></w:body></w:document>")])


def photos_zip() -> bytes:
    """A ZIP of something else (photos), named .docx."""
    return zip_bytes([("IMG_0001.jpg", b"\xff\xd8\xff\xe0" + b"\0" * 64), ("IMG_0002.jpg", b"\xff\xd8\xff\xe0" + b"\1" * 64)])
