"""The words quantities are written in (`quantities.py` reads them): units and their spellings,
number words and scales, currencies, durations' lengths, periods written as words, month names."""

from __future__ import annotations

import re

# canonical unit: its spellings. Lowercase words of three letters or more match in any case;
# abbreviations match as written (`5G` is a network, `5 g` five grams; `8 MB` is not `8 mb`).
UNITS = {
    "millisecond": "millisecond milliseconds ms msec",
    "second": "second seconds sec secs",
    "minute": "minute minutes min mins",
    "hour": "hour hours hr hrs h",
    "day": "day days",
    "week": "week weeks wk wks",
    "month": "month months mo mos",
    "year": "year years yr yrs",
    "decade": "decade decades",
    "century": "century centuries",
    "percent": "% percent pct percentage|points percentage|point per|cent",
    "nm": "nm nanometer nanometers nanometre nanometres",
    "um": "µm μm micron microns micrometer micrometers",
    "mm": "mm millimeter millimeters millimetre millimetres",
    "cm": "cm centimeter centimeters centimetre centimetres",
    "m": "meter meters metre metres",
    "km": "km kilometer kilometers kilometre kilometres",
    "mile": "mile miles",
    "foot": "foot feet ft",
    "inch": "inch inches",
    "yard": "yard yards",
    "ug": "µg μg mcg microgram micrograms",
    "mg": "mg milligram milligrams",
    "g": "g gram grams",
    "kg": "kg kilogram kilograms kilo kilos",
    "lb": "lb lbs pound pounds",
    "oz": "oz ounce ounces",
    "ton": "ton tons tonne tonnes",
    "ml": "ml mL milliliter milliliters millilitre millilitres",
    "l": "L liter liters litre litres",
    "gallon": "gallon gallons",
    "bit": "bit bits",
    "byte": "byte bytes",
    "kb": "KB kB kilobyte kilobytes",
    "mb": "MB megabyte megabytes",
    "gb": "GB gigabyte gigabytes",
    "tb": "TB terabyte terabytes",
    "mbps": "Mbps",
    "gbps": "Gbps",
    "hz": "Hz hertz",
    "khz": "kHz kilohertz",
    "mhz": "MHz megahertz",
    "ghz": "GHz gigahertz",
    "celsius": "°C ºC °|C degrees|Celsius degree|Celsius degrees|celsius degree|celsius celsius",
    "fahrenheit": "°F ºF °|F degrees|Fahrenheit degree|Fahrenheit degrees|fahrenheit degree|fahrenheit fahrenheit",
    "degree": "° degree degrees",
    "w": "watt watts",
    "kw": "kW kilowatt kilowatts",
    "mw": "MW megawatt megawatts",
    "kwh": "kWh",
    "v": "volt volts",
    "mah": "mAh",
    "mph": "mph",
    "kmh": "km/h kph",
    "kcal": "kcal calorie calories",
    "mmhg": "mmHg",
    "iu": "IU",
}
ALIASES = [(alias.split("|"), unit) for unit, aliases in UNITS.items() for alias in aliases.split()]


def fold(alias: str) -> str:
    return "".join(alias.split()).lower()


def _alias_pattern(words: list[str]) -> str:
    body = r"\s?".join(map(re.escape, words))
    plain = "".join(words)
    return f"(?i:{body})" if plain.isalpha() and plain.islower() and len(plain) >= 3 else body


UNIT_OF = {fold("".join(words)): unit for words, unit in ALIASES}
UNIT = "|".join(_alias_pattern(w) for w, _ in sorted(ALIASES, key=lambda a: -len("".join(a[0]))))
QUALIFIER = r"(?:(?:calendar|business|working|consecutive|full|straight)[\s-])?"
SCALE = {
    "thousand": 1e3,
    "million": 1e6,
    "billion": 1e9,
    "trillion": 1e12,
    "k": 1e3,
    "K": 1e3,
    "m": 1e6,
    "M": 1e6,
    "mn": 1e6,
    "bn": 1e9,
    "b": 1e9,
    "B": 1e9,
}
CURRENCY_CODES = ("USD", "EUR", "GBP", "JPY", "CAD", "AUD", "CHF", "CNY", "INR")
CURRENCY = rf"(?:US\$|A\$|C\$|[$€£¥]|(?:{'|'.join(CURRENCY_CODES)})\s?)"
ORDINAL = {"st", "nd", "rd", "th", "s", "x", "X"}  # 21st, 1990s, 3x: still the number

SMALL = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
    "sixteen seventeen eighteen nineteen"
).split()
TENS = "twenty thirty forty fifty sixty seventy eighty ninety".split()
WORD_VALUE = {**{w: i for i, w in enumerate(SMALL)}, **{w: 10 * i for i, w in enumerate(TENS, 2)}, "dozen": 12}
ORDINAL_WORDS = (
    "third fourth fifth sixth seventh eighth ninth tenth eleventh twelfth thirteenth fourteenth fifteenth "
    "sixteenth seventeenth eighteenth nineteenth twentieth thirtieth"
).split()
WORD_VALUE.update({w: i for i, w in enumerate(ORDINAL_WORDS[:18], 3)} | {"twentieth": 20, "thirtieth": 30})
# a duration's length in its base unit: seconds, or months (a month is no whole number of days)
DURATION = {
    "millisecond": ("second", 0.001),
    "second": ("second", 1),
    "minute": ("second", 60),
    "hour": ("second", 3600),
    "day": ("second", 86400),
    "week": ("second", 604800),
    "month": ("month", 1),
    "year": ("month", 12),
    "decade": ("month", 120),
    "century": ("month", 1200),
}

MONTH_OF = {
    name: i
    for i, names in enumerate(
        (
            "January Jan",
            "February Feb",
            "March Mar",
            "April Apr",
            "May",
            "June Jun",
            "July Jul",
            "August Aug",
            "September Sept Sep",
            "October Oct",
            "November Nov",
            "December Dec",
        ),
        1,
    )
    for name in names.split()
}

# how often, in words: a period ("quarterly", "every quarter", "once a year") is read as its length,
# so that "annual" and "every 12 months" are one quantity and "annual" and "quarterly" rival ones
EVERY = {"hourly": "1 hour", "daily": "1 day", "weekly": "1 week", "fortnightly": "2 week", "monthly": "1 month"}
EVERY |= {"quarterly": "3 month", "yearly": "1 year", "annually": "1 year", "annual": "1 year"}
PERIOD = {"hour": "1 hour", "day": "1 day", "week": "1 week", "fortnight": "2 week", "month": "1 month"}
PERIOD |= {"quarter": "3 month", "year": "1 year"}
