"""Build the `filings` development corpus (issue #46): quarterly-report-shaped PDFs whose company
and period live only in the title page and the running heads, and questions that name both.

The shape it measures: every filing has the same sections in the same words (net sales, share
repurchases, legal proceedings ...), so the words a question shares with the answering passage are
shared with every other filing too; what tells the filings apart is the company and the quarter,
printed on the title page and in each page's running head, never in the body. That is where the
keyword side's document context (pipeline/context.py) can help or drown a chunk's own words.

Everything is generated here from fixed word lists and a seeded random source: no text is copied
from anywhere, so the corpus carries no third-party licence. Company names are invented.

    python bench/corpora/filings/build.py OUT   # writes OUT/docs/*.pdf and OUT/questions.jsonl
    python bench/corpora/filings/build.py OUT --named-body   # the same, and each section's first
        # paragraph opens naming the company and both periods, as real filings' bodies do

Deterministic (SEED); fpdf2 writes the PDFs (Helvetica, A4, one section a page or more).
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

SEED = 20261206
PERIODS = (  # (period ended, ordinal quarter, short form)
    ("March 31, 2025", "first", "Q1"),
    ("June 30, 2025", "second", "Q2"),
)
Company = tuple[str, str, tuple[str, ...], tuple[str, ...]]  # (name, short name, products, regions)
COMPANIES: tuple[Company, ...] = (
    ("Northwind Pumps, Inc.", "Northwind", ("industrial pumps", "valve assemblies", "field service contracts"), ("Ohio", "Brazil")),
    ("Calderon Foods Corporation", "Calderon", ("frozen meals", "snack bars", "private label sauces"), ("Texas", "Mexico")),
    ("Brightwater Semiconductor Ltd.", "Brightwater", ("power management chips", "sensor modules", "wafer services"), ("Arizona", "Taiwan")),
    ("Halvorsen Shipping Group", "Halvorsen", ("container freight", "charter services", "port logistics"), ("Norway", "Singapore")),
    ("Quillfeather Software, Inc.", "Quillfeather", ("subscription licenses", "cloud hosting", "professional services"), ("Washington", "Ireland")),
    ("Marlowe Medical Devices Corp.", "Marlowe", ("infusion pumps", "surgical staplers", "diagnostic imaging"), ("Minnesota", "Germany")),
    ("Ostrander Energy Partners", "Ostrander", ("natural gas gathering", "crude oil storage", "pipeline transport"), ("Oklahoma", "Alberta")),
    ("Pellworth Retail Holdings", "Pellworth", ("apparel", "home goods", "online marketplace fees"), ("Georgia", "Canada")),
    ("Tamsin Aerospace Company", "Tamsin", ("turbine blades", "avionics", "maintenance and repair"), ("Kansas", "France")),
    ("Vexley Insurance Group, Inc.", "Vexley", ("property policies", "auto policies", "reinsurance"), ("Illinois", "Bermuda")),
)

# Each section: (heading, paragraphs). A paragraph is a list of sentence templates; slots are
# filled per filing ({p0} {p1} {p2} products, {r0} {r1} regions, {n...} numbers). No template names
# the company or the period: the body says "the quarter" and "the prior-year quarter".
SECTIONS = (
    ("Net sales", [
        ["Net sales for the quarter were ${n1} million, {dir1} {pct1} percent from the prior-year quarter.",
         "Sales of {p0} contributed ${n2} million, and {p1} contributed ${n3} million.",
         "The change in net sales reflected {reason1} and {reason2}."],
        ["Net sales in {r0} were ${n4} million and net sales in {r1} were ${n5} million.",
         "Foreign currency translation {dir2} net sales by ${n6} million compared with the prior-year quarter."]]),
    ("Cost of sales and gross margin", [
        ["Cost of sales was ${n7} million for the quarter and gross margin was {pct2} percent.",
         "Gross margin {dir3} primarily because of {reason3}.",
         "Freight and warehousing costs for {p2} were ${n8} million."]]),
    ("Operating expenses", [
        ["Selling, general and administrative expenses were ${n9} million, or {pct3} percent of net sales.",
         "Research and development expenses were ${n10} million, focused on {p0} and {p1}.",
         "Restructuring charges of ${n11} million related to the consolidation of facilities in {r1}."]]),
    ("Segment information", [
        ["The company reports two segments, {r0} operations and international operations.",
         "Segment operating income for {r0} operations was ${n12} million and for international operations ${n13} million.",
         "Intersegment sales of {p2} are eliminated in consolidation."]]),
    ("Liquidity and capital resources", [
        ["Cash and cash equivalents were ${n14} million at the end of the quarter.",
         "Cash provided by operating activities was ${n15} million, and capital expenditures were ${n16} million, mainly for {p1} capacity in {r0}.",
         "Management believes existing cash and the revolving credit facility will be sufficient for the next twelve months."]]),
    ("Debt", [
        ["Long-term debt was ${n17} million, including senior notes bearing interest at {pct4} percent.",
         "The revolving credit facility of ${n18} million had ${n19} million drawn at the end of the quarter.",
         "The company was in compliance with all debt covenants."]]),
    ("Share repurchases and dividends", [
        ["During the quarter the company repurchased {n20} thousand shares for ${n21} million under its repurchase program.",
         "The board declared a quarterly cash dividend of ${cents} per share.",
         "Approximately ${n22} million remained available under the repurchase authorization."]]),
    ("Income taxes", [
        ["The effective income tax rate for the quarter was {pct5} percent, compared with {pct6} percent in the prior-year quarter.",
         "The change in the effective tax rate reflected {taxreason}."]]),
    ("Legal proceedings", [
        ["The company is a defendant in a lawsuit in {r0} alleging {claim} related to {p0}.",
         "Management does not expect the outcome to have a material adverse effect on the financial statements.",
         "An accrual of ${n23} million has been recorded for probable losses."]]),
    ("Risk factors", [
        ["Demand for {p1} depends on economic conditions in {r0} and {r1}.",
         "Disruptions in the supply chain for {p2} could increase costs and delay deliveries.",
         "There have been no material changes to the risk factors disclosed in the annual report."]]),
    ("Controls and procedures", [
        ["Management, with the participation of the chief executive officer and chief financial officer, evaluated the disclosure controls and procedures.",
         "Based on that evaluation they concluded that the disclosure controls and procedures were effective.",
         "There were no changes in internal control over financial reporting during the quarter that materially affected it."]]),
)
# Notes to the financial statements: the boilerplate every filing carries in nearly the same words,
# which makes a filing long (tens of chunks) and its sections' words common to every filing.
NOTES = (
    ("Basis of presentation", [
        ["The condensed consolidated financial statements are unaudited and have been prepared in accordance with generally accepted accounting principles for interim financial information.",
         "In the opinion of management they include all adjustments, consisting of normal recurring adjustments, necessary for a fair presentation.",
         "Results for interim periods are not necessarily indicative of results for the full year."],
        ["These statements should be read together with the audited financial statements in the annual report.",
         "Certain prior-period amounts have been reclassified to conform to the current presentation, with no effect on net income."]]),
    ("Revenue recognition", [
        ["Revenue is recognized when control of {p0} or {p1} transfers to the customer, generally on shipment or delivery.",
         "Revenue from {p2} is recognized over time as the services are performed.",
         "Contract liabilities were ${n24} million at the end of the quarter and ${n25} million at the start of the year."],
        ["The company estimates variable consideration such as rebates, returns and volume discounts using the expected value method.",
         "Remaining performance obligations were ${n26} million, of which about {pct7} percent is expected to be recognized within twelve months."]]),
    ("Inventories", [
        ["Inventories are stated at the lower of cost and net realizable value, cost determined on a first-in, first-out basis.",
         "Raw materials were ${n27} million, work in process ${n28} million and finished goods ${n29} million.",
         "Reserves for excess and obsolete inventory of {p0} were ${n30} million."]]),
    ("Goodwill and intangible assets", [
        ["Goodwill was ${n31} million, all of it allocated to the {r0} operations reporting unit.",
         "Amortization expense for intangible assets was ${n32} million for the quarter.",
         "No impairment indicators were identified during the quarter."]]),
    ("Leases", [
        ["The company leases manufacturing plants, warehouses and offices in {r0} and {r1} under operating leases.",
         "Operating lease cost was ${n33} million for the quarter and right-of-use assets were ${n34} million.",
         "The weighted average remaining lease term was {yrs} years."]]),
    ("Fair value measurements", [
        ["Financial instruments measured at fair value include money market funds, foreign currency forward contracts and interest rate swaps.",
         "The fair value of senior notes, based on quoted market prices, was ${n35} million.",
         "There were no transfers between levels of the fair value hierarchy during the quarter."]]),
    ("Derivatives and hedging", [
        ["The company uses foreign currency forward contracts to hedge purchases of {p2} denominated in the currency of {r1}.",
         "The notional amount of outstanding contracts was ${n36} million.",
         "Gains and losses on cash flow hedges are reclassified into cost of sales when the hedged item affects earnings."]]),
    ("Earnings per share", [
        ["Basic earnings per share were ${eps1} and diluted earnings per share were ${eps2} for the quarter.",
         "Diluted shares include the effect of stock options and restricted stock units under the treasury stock method.",
         "Anti-dilutive awards of {n37} thousand shares were excluded from the computation."]]),
    ("Stock-based compensation", [
        ["Stock-based compensation expense was ${n38} million for the quarter, recognized over the awards' vesting periods.",
         "During the quarter the company granted {n39} thousand restricted stock units and {n40} thousand performance share units."]]),
    ("Commitments and contingencies", [
        ["Purchase commitments for {p1} components totaled ${n41} million at the end of the quarter.",
         "The company provides product warranties on {p0}; the warranty reserve was ${n42} million.",
         "Environmental remediation costs at a former site in {r0} are accrued when probable and estimable."]]),
    ("Pension and postretirement benefits", [
        ["Net periodic pension cost was ${n43} million for the quarter.",
         "The company contributed ${n44} million to its defined benefit plans and expects to contribute ${n45} million for the full year."]]),
    ("Accumulated other comprehensive income", [
        ["Accumulated other comprehensive loss consisted of foreign currency translation adjustments, pension adjustments and unrealized losses on cash flow hedges.",
         "Translation adjustments for operations in {r1} were ${n46} million for the quarter."]]),
    ("Subsequent events", [
        ["After the end of the quarter the company entered into an agreement to acquire a supplier of {p2} for ${n47} million in cash.",
         "The transaction is expected to close in the following quarter, subject to regulatory approval."]]),
)
REASONS = ("higher volumes", "lower volumes", "price increases", "promotional pricing", "new customer contracts",
           "the loss of a major customer", "a favorable product mix", "an unfavorable product mix", "higher input costs",
           "lower commodity prices", "the timing of shipments", "an acquisition completed last year")
TAX_REASONS = ("a discrete benefit from stock compensation", "a higher share of earnings in jurisdictions with higher rates",
               "the release of a valuation allowance", "nondeductible expenses")
CLAIMS = ("patent infringement", "breach of contract", "product liability", "false advertising", "environmental damage")

# Question topics: words every filing's body uses for the section, as a person would type them.
TOPICS = (
    ("net sales", 0), ("net sales by region", 0), ("gross margin", 1), ("cost of sales", 1),
    ("research and development expenses", 2), ("segment operating income", 3), ("cash and cash equivalents", 4),
    ("capital expenditures", 4), ("long-term debt", 5), ("revolving credit facility", 5),
    ("share repurchases", 6), ("quarterly dividend per share", 6), ("effective tax rate", 7),
    ("lawsuit", 8), ("supply chain risk", 9), ("disclosure controls", 10),
    ("contract liabilities", 11), ("inventory reserves", 11), ("goodwill impairment", 11),
    ("operating lease cost", 11), ("diluted earnings per share", 11), ("stock-based compensation expense", 11),
    ("warranty reserve", 11), ("pension contributions", 11), ("acquisition after quarter end", 11),
)
QUESTIONS_PER_FILING = 10


def period_phrase(rng: random.Random, period: tuple[str, str, str]) -> str:
    ended, ordinal, short = period
    month, day_year = ended.split(" ", 1)
    day, year = day_year.replace(",", "").split()
    return rng.choice((f"{short} {year}", f"{ordinal} quarter {year}", f"quarter ended {month} {day} {year}",
                       f"{month} {year} quarter"))


def filling(rng: random.Random, company: Company) -> dict[str, str]:
    _name, _short, products, regions = company
    values: dict[str, str] = {f"p{i}": p for i, p in enumerate(products)} | {f"r{i}": r for i, r in enumerate(regions)}
    for i in range(1, 48):
        values[f"n{i}"] = f"{rng.uniform(5, 950):,.1f}"
    values["yrs"] = f"{rng.uniform(2, 12):.1f}"
    values["eps1"], values["eps2"] = f"{rng.uniform(0.1, 4):.2f}", f"{rng.uniform(0.1, 4):.2f}"
    for i in range(1, 8):
        values[f"pct{i}"] = f"{rng.uniform(1, 45):.1f}"
    for i in range(1, 4):
        values[f"dir{i}"] = rng.choice(("up", "down", "increasing", "decreasing"))
    for i in range(1, 4):
        values[f"reason{i}"] = rng.choice(REASONS)
    values["taxreason"] = rng.choice(TAX_REASONS)
    values["claim"] = rng.choice(CLAIMS)
    values["cents"] = f"{rng.uniform(0.05, 1.5):.2f}"
    return values


def write_pdf(path: Path, company: Company, period: tuple[str, str, str], values: dict[str, str],
              named_body: bool = False) -> None:
    from fpdf import FPDF

    name = company[0]
    head = f"{name} | Form 10-Q | Quarterly period ended {period[0]}"

    class Filing(FPDF):
        def header(self) -> None:
            if self.page_no() > 1:
                self.set_font("Helvetica", size=8)
                self.cell(0, 6, head, align="C", new_x="LMARGIN", new_y="NEXT")
                self.ln(10)

        def footer(self) -> None:
            self.set_y(-12)
            self.set_font("Helvetica", size=8)
            self.cell(0, 6, f"{self.page_no()}", align="C")

    pdf = Filing(format="A4")
    pdf.set_title(path.stem)  # an identifier, as EDGAR's are: no words for the context
    pdf.set_auto_page_break(auto=True, margin=18)
    pdf.add_page()
    pdf.set_font("Helvetica", "B", 16)
    pdf.multi_cell(0, 10, "UNITED STATES SECURITIES AND EXCHANGE COMMISSION\nFORM 10-Q", align="C", new_x="LMARGIN", new_y="NEXT")
    pdf.ln(6)
    pdf.set_font("Helvetica", size=12)
    pdf.multi_cell(0, 7, f"QUARTERLY REPORT for the quarterly period ended {period[0]}\n\n{name}", align="C",
                   new_x="LMARGIN", new_y="NEXT")
    for heading, paragraphs in (*NOTES, *SECTIONS):
        pdf.add_page()
        pdf.set_font("Helvetica", "B", 12)
        pdf.multi_cell(0, 8, heading, new_x="LMARGIN", new_y="NEXT")
        pdf.set_font("Helvetica", size=10)
        for number, paragraph in enumerate(paragraphs):
            text = " ".join(sentence.format(**values) for sentence in paragraph)
            if named_body and number == 0:  # as real filings do: the company and both periods in the body
                prior = period[0].replace("2025", "2024")
                text = f"For {company[1]}, the three months ended {period[0]} compared with {prior}: " + text
            pdf.multi_cell(0, 5.5, text, new_x="LMARGIN", new_y="NEXT")
            pdf.ln(3)
    pdf.output(str(path))


def main(out: Path, named_body: bool = False) -> None:
    rng = random.Random(SEED)
    docs = out / "docs"
    docs.mkdir(parents=True, exist_ok=True)
    questions: list[dict[str, object]] = []
    number = 0
    for c, company in enumerate(COMPANIES):
        for p, period in enumerate(PERIODS):
            number += 1
            file_name = f"{1000000 + 7919 * c:010d}-25-{100 + 37 * number:06d}.pdf"  # accession-shaped
            write_pdf(docs / file_name, company, period, filling(rng, company), named_body)
            for index, (topic, _section) in enumerate(rng.sample(TOPICS, QUESTIONS_PER_FILING)):
                questions.append({"id": f"f{c:02d}{p}-{index}",
                                  "query": f"{company[1]} {period_phrase(rng, period)} {topic}",
                                  "relevant": [file_name]})
    with open(out / "questions.jsonl", "w", encoding="utf-8") as handle:
        for row in questions:
            handle.write(json.dumps(row) + "\n")
    print(f"{number} filings, {len(questions)} questions under {out}")


if __name__ == "__main__":
    main(Path(sys.argv[1]), named_body="--named-body" in sys.argv[2:])
