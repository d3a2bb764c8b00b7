"""What free OCR does with Chinese, Japanese and Korean: a page of each drawn with a CJK font, read
through the shipped path (images.extract: isolated worker, pinned models, layout.py), scored by
character recall (`quality.char_recall`, in order, spaces ignored) against the text drawn.

    python bench/bench_ocr_cjk.py [--font PATH]

Needs a font with Han, kana and Hangul (Debian: `apt-get install fonts-wqy-microhei`); skips,
saying so, without one. The sentences are this project's own.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

FONTS = ("/usr/share/fonts/truetype/wqy/wqy-microhei.ttc", "/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc")
PAGES = {
    "chinese": ["图书馆的档案室保存着许多古老的地图和信件。", "管理员每天检查温度和湿度，防止纸张受损。",
                "研究人员可以预约阅览珍贵的手稿。"],
    "japanese": ["図書館の書庫には古い地図と手紙がたくさん保管されています。", "司書は毎日、温度と湿度を確認しています。",
                 "研究者は貴重な写本の閲覧を予約できます。"],
    "korean": ["도서관 서고에는 오래된 지도와 편지가 많이 보관되어 있습니다.", "사서는 매일 온도와 습도를 확인합니다.",
               "연구자는 귀중한 필사본 열람을 예약할 수 있습니다."],
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--font", type=Path, default=None)
    args = parser.parse_args()
    font = args.font or next((Path(name) for name in FONTS if Path(name).is_file()), None)
    if font is None:
        print("bench_ocr_cjk skipped: no CJK font (apt-get install fonts-wqy-microhei)")
        return 0
    from PIL import Image, ImageDraw, ImageFont

    from pinakes.extract import images
    from pinakes.extract.quality import char_recall

    face = ImageFont.truetype(str(font), 32)
    results: dict[str, dict[str, object]] = {}
    with tempfile.TemporaryDirectory() as scratch:
        for language, lines in PAGES.items():
            page = Image.new("L", (1240, 120 + 60 * len(lines)), 255)
            draw = ImageDraw.Draw(page)
            for number, line in enumerate(lines):
                draw.text((60, 60 + 60 * number), line, fill=0, font=face)
            path = Path(scratch) / f"{language}.png"
            page.save(path)
            read = images.extract(path).text
            recall = char_recall("".join(lines), read)
            results[language] = {"char_recall": round(recall.value or 0, 3), "read": read}
    print(json.dumps({"font": font.name, **results}, ensure_ascii=False, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
