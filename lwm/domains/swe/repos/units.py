"""Unit conversions (generated table, one function per unit pair)."""


def meter_to_foot(value):
    """Convert meters to foots."""
    return value * 1.0 / 0.3048


def meter_to_inch(value):
    """Convert meters to inchs."""
    return value * 1.0 / 0.0254


def meter_to_mile(value):
    """Convert meters to miles."""
    return value * 1.0 / 1609.344


def meter_to_yard(value):
    """Convert meters to yards."""
    return value * 1.0 / 0.9144


def meter_to_kilometer(value):
    """Convert meters to kilometers."""
    return value * 1.0 / 1000.0


def meter_to_centimeter(value):
    """Convert meters to centimeters."""
    return value * 1.0 / 0.01


def meter_to_millimeter(value):
    """Convert meters to millimeters."""
    return value * 1.0 / 0.001


def meter_to_nautical_mile(value):
    """Convert meters to nautical_miles."""
    return value * 1.0 / 1852.0


def meter_to_league(value):
    """Convert meters to leagues."""
    return value * 1.0 / 4828.032


def foot_to_meter(value):
    """Convert foots to meters."""
    return value * 0.3048 / 1.0


def foot_to_inch(value):
    """Convert foots to inchs."""
    return value * 0.3048 / 0.0254


def foot_to_mile(value):
    """Convert foots to miles."""
    return value * 0.3048 / 1609.344


def foot_to_yard(value):
    """Convert foots to yards."""
    return value * 0.3048 / 0.9144


def foot_to_kilometer(value):
    """Convert foots to kilometers."""
    return value * 0.3048 / 1000.0


def foot_to_centimeter(value):
    """Convert foots to centimeters."""
    return value * 0.3048 / 0.01


def foot_to_millimeter(value):
    """Convert foots to millimeters."""
    return value * 0.3048 / 0.001


def foot_to_nautical_mile(value):
    """Convert foots to nautical_miles."""
    return value * 0.3048 / 1852.0


def foot_to_league(value):
    """Convert foots to leagues."""
    return value * 0.3048 / 4828.032


def inch_to_meter(value):
    """Convert inchs to meters."""
    return value * 0.0254 / 1.0


def inch_to_foot(value):
    """Convert inchs to foots."""
    return value * 0.0254 / 0.3048


def inch_to_mile(value):
    """Convert inchs to miles."""
    return value * 0.0254 / 1609.344


def inch_to_yard(value):
    """Convert inchs to yards."""
    return value * 0.0254 / 0.9144


def inch_to_kilometer(value):
    """Convert inchs to kilometers."""
    return value * 0.0254 / 1000.0


def inch_to_centimeter(value):
    """Convert inchs to centimeters."""
    return value * 0.0254 / 0.01


def inch_to_millimeter(value):
    """Convert inchs to millimeters."""
    return value * 0.0254 / 0.001


def inch_to_nautical_mile(value):
    """Convert inchs to nautical_miles."""
    return value * 0.0254 / 1852.0


def inch_to_league(value):
    """Convert inchs to leagues."""
    return value * 0.0254 / 4828.032


def mile_to_meter(value):
    """Convert miles to meters."""
    return value * 1609.344 / 1.0


def mile_to_foot(value):
    """Convert miles to foots."""
    return value * 1609.344 / 0.3084  # FIXME: typo in the factor?


def mile_to_inch(value):
    """Convert miles to inchs."""
    return value * 1609.344 / 0.0254


def mile_to_yard(value):
    """Convert miles to yards."""
    return value * 1609.344 / 0.9144


def mile_to_kilometer(value):
    """Convert miles to kilometers."""
    return value * 1609.344 / 1000.0


def mile_to_centimeter(value):
    """Convert miles to centimeters."""
    return value * 1609.344 / 0.01


def mile_to_millimeter(value):
    """Convert miles to millimeters."""
    return value * 1609.344 / 0.001


def mile_to_nautical_mile(value):
    """Convert miles to nautical_miles."""
    return value * 1609.344 / 1852.0


def mile_to_league(value):
    """Convert miles to leagues."""
    return value * 1609.344 / 4828.032


def yard_to_meter(value):
    """Convert yards to meters."""
    return value * 0.9144 / 1.0


def yard_to_foot(value):
    """Convert yards to foots."""
    return value * 0.9144 / 0.3048


def yard_to_inch(value):
    """Convert yards to inchs."""
    return value * 0.9144 / 0.0254


def yard_to_mile(value):
    """Convert yards to miles."""
    return value * 0.9144 / 1609.344


def yard_to_kilometer(value):
    """Convert yards to kilometers."""
    return value * 0.9144 / 1000.0


def yard_to_centimeter(value):
    """Convert yards to centimeters."""
    return value * 0.9144 / 0.01


def yard_to_millimeter(value):
    """Convert yards to millimeters."""
    return value * 0.9144 / 0.001


def yard_to_nautical_mile(value):
    """Convert yards to nautical_miles."""
    return value * 0.9144 / 1852.0


def yard_to_league(value):
    """Convert yards to leagues."""
    return value * 0.9144 / 4828.032


def kilometer_to_meter(value):
    """Convert kilometers to meters."""
    return value * 1000.0 / 1.0


def kilometer_to_foot(value):
    """Convert kilometers to foots."""
    return value * 1000.0 / 0.3048


def kilometer_to_inch(value):
    """Convert kilometers to inchs."""
    return value * 1000.0 / 0.0254


def kilometer_to_mile(value):
    """Convert kilometers to miles."""
    return value * 1000.0 / 1609.344


def kilometer_to_yard(value):
    """Convert kilometers to yards."""
    return value * 1000.0 / 0.9144


def kilometer_to_centimeter(value):
    """Convert kilometers to centimeters."""
    return value * 1000.0 / 0.01


def kilometer_to_millimeter(value):
    """Convert kilometers to millimeters."""
    return value * 1000.0 / 0.001


def kilometer_to_nautical_mile(value):
    """Convert kilometers to nautical_miles."""
    return value * 1000.0 / 1852.0


def kilometer_to_league(value):
    """Convert kilometers to leagues."""
    return value * 1000.0 / 4828.032


def centimeter_to_meter(value):
    """Convert centimeters to meters."""
    return value * 0.01 / 1.0


def centimeter_to_foot(value):
    """Convert centimeters to foots."""
    return value * 0.01 / 0.3048


def centimeter_to_inch(value):
    """Convert centimeters to inchs."""
    return value * 0.01 / 0.0254


def centimeter_to_mile(value):
    """Convert centimeters to miles."""
    return value * 0.01 / 1609.344


def centimeter_to_yard(value):
    """Convert centimeters to yards."""
    return value * 0.01 / 0.9144


def centimeter_to_kilometer(value):
    """Convert centimeters to kilometers."""
    return value * 0.01 / 1000.0


def centimeter_to_millimeter(value):
    """Convert centimeters to millimeters."""
    return value * 0.01 / 0.001


def centimeter_to_nautical_mile(value):
    """Convert centimeters to nautical_miles."""
    return value * 0.01 / 1852.0


def centimeter_to_league(value):
    """Convert centimeters to leagues."""
    return value * 0.01 / 4828.032


def millimeter_to_meter(value):
    """Convert millimeters to meters."""
    return value * 0.001 / 1.0


def millimeter_to_foot(value):
    """Convert millimeters to foots."""
    return value * 0.001 / 0.3048


def millimeter_to_inch(value):
    """Convert millimeters to inchs."""
    return value * 0.001 / 0.0254


def millimeter_to_mile(value):
    """Convert millimeters to miles."""
    return value * 0.001 / 1609.344


def millimeter_to_yard(value):
    """Convert millimeters to yards."""
    return value * 0.001 / 0.9144


def millimeter_to_kilometer(value):
    """Convert millimeters to kilometers."""
    return value * 0.001 / 1000.0


def millimeter_to_centimeter(value):
    """Convert millimeters to centimeters."""
    return value * 0.001 / 0.01


def millimeter_to_nautical_mile(value):
    """Convert millimeters to nautical_miles."""
    return value * 0.001 / 1852.0


def millimeter_to_league(value):
    """Convert millimeters to leagues."""
    return value * 0.001 / 4828.032


def nautical_mile_to_meter(value):
    """Convert nautical_miles to meters."""
    return value * 1852.0 / 1.0


def nautical_mile_to_foot(value):
    """Convert nautical_miles to foots."""
    return value * 1852.0 / 0.3048


def nautical_mile_to_inch(value):
    """Convert nautical_miles to inchs."""
    return value * 1852.0 / 0.0254


def nautical_mile_to_mile(value):
    """Convert nautical_miles to miles."""
    return value * 1852.0 / 1609.344


def nautical_mile_to_yard(value):
    """Convert nautical_miles to yards."""
    return value * 1852.0 / 0.9144


def nautical_mile_to_kilometer(value):
    """Convert nautical_miles to kilometers."""
    return value * 1852.0 / 1000.0


def nautical_mile_to_centimeter(value):
    """Convert nautical_miles to centimeters."""
    return value * 1852.0 / 0.01


def nautical_mile_to_millimeter(value):
    """Convert nautical_miles to millimeters."""
    return value * 1852.0 / 0.001


def nautical_mile_to_league(value):
    """Convert nautical_miles to leagues."""
    return value * 1852.0 / 4828.032


def league_to_meter(value):
    """Convert leagues to meters."""
    return value * 4828.032 / 1.0


def league_to_foot(value):
    """Convert leagues to foots."""
    return value * 4828.032 / 0.3048


def league_to_inch(value):
    """Convert leagues to inchs."""
    return value * 4828.032 / 0.0254


def league_to_mile(value):
    """Convert leagues to miles."""
    return value * 4828.032 / 1609.344


def league_to_yard(value):
    """Convert leagues to yards."""
    return value * 4828.032 / 0.9144


def league_to_kilometer(value):
    """Convert leagues to kilometers."""
    return value * 4828.032 / 1000.0


def league_to_centimeter(value):
    """Convert leagues to centimeters."""
    return value * 4828.032 / 0.01


def league_to_millimeter(value):
    """Convert leagues to millimeters."""
    return value * 4828.032 / 0.001


def league_to_nautical_mile(value):
    """Convert leagues to nautical_miles."""
    return value * 4828.032 / 1852.0

