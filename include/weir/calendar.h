/* weir/calendar.h - the calendar periods a limit can reset on. */
#ifndef WEIR_CALENDAR_H
#define WEIR_CALENDAR_H

typedef enum weir_calendar {
    WEIR_CALENDAR_NONE = 0,
    WEIR_CALENDAR_DAY = 1,
    WEIR_CALENDAR_MONTH = 2,
    WEIR_CALENDAR_YEAR = 3
} weir_calendar;

#endif /* WEIR_CALENDAR_H */
