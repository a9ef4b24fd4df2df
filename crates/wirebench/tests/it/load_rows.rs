//! The `all` row of a load run with a relayed and a request event type: in the JSON, the
//! terminal, the HTML page and `report` of the saved run it is the sum of the event rows,
//! column by column, and the requests' counts are in their own row and the `replies` line
//! (docs/modes/load.md, "Per event type and overall").

use wirebench::room::{self, RoomServer};
use wirebench_core::report::{LoadTypeResult, Report, Results};

use crate::support::{assert_valid_report, read_json, wirebench};

/// The rows of the terminal's counts table: name, then sent, expected, arrived.
fn text_rows(out: &str) -> Vec<(String, [u64; 3])> {
    out.lines()
        .skip_while(|l| !l.starts_with("events sent and their arrivals"))
        .skip(2)
        .take_while(|l| !l.trim().is_empty())
        .map(|l| {
            let c: Vec<&str> = l.split_whitespace().collect();
            let n = |i: usize| c[i].parse::<u64>().unwrap_or_else(|_| panic!("a count in column {i}: {l}"));
            (c[0].to_owned(), [n(4), n(5), n(6)])
        })
        .collect()
}

/// The rows of the HTML page's load table: name, then sent, expected, arrived.
fn html_rows(page: &str) -> Vec<(String, [u64; 3])> {
    let table = page.split("<table class=\"load\">").nth(1).expect("a load table").split("</table>").next().unwrap();
    table
        .lines()
        .filter(|l| l.starts_with("<tr><td>"))
        .map(|l| {
            let c: Vec<&str> =
                l.trim_start_matches("<tr><td>").trim_end_matches("</td></tr>").split("</td><td>").collect();
            let n = |i: usize| c[i].parse::<u64>().unwrap_or_else(|_| panic!("a count in column {i}: {l}"));
            (c[0].to_owned(), [n(3), n(4), n(5)])
        })
        .collect()
}

/// The sum of `rows` by column, and the row named `all`.
fn sum_and_all(rows: &[(String, [u64; 3])]) -> ([u64; 3], [u64; 3]) {
    let mut sum = [0; 3];
    for (_, r) in rows.iter().filter(|(n, _)| n != "all") {
        for (s, v) in sum.iter_mut().zip(r) {
            *s += v;
        }
    }
    let all = rows.iter().find(|(n, _)| n == "all").expect("an all row").1;
    (sum, all)
}

/// Before: the terminal's and the HTML's `all` row counted the requests in `sent` and only
/// the deliveries in `expected` and `arrived` (and the terminal listed no request row
/// beside it), while the JSON's `overall` counted the replies too.
#[test]
fn the_all_row_is_the_sum_of_the_event_rows_in_every_view() {
    let r = RoomServer::start(&room::Config::loopback()).expect("room starts on loopback");
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("rows.json");
    let url = format!("ws://{}/rooms/rows", r.local_addr());
    let run = wirebench(&[
        "load",
        &url,
        "-c",
        "6",
        "--room-size",
        "3",
        "--mix",
        "cursor=1,save=1",
        "--rate",
        "20/s",
        "-d",
        "1s",
        "--no-hiccup",
        "-v",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_eq!(run.code, 0, "{}{}", run.out, run.err);
    let raw = read_json(&json);
    assert_valid_report(&raw);
    let report: Report = serde_json::from_value(raw).unwrap();
    let Results::Load(l) = &report.results else { panic!("a load report") };
    let (cursor, save) = (&l.types[0], &l.types[1]);
    assert_eq!((cursor.request, save.request), (false, true), "{}", run.out);
    assert!(cursor.sent > 0 && save.sent > 0, "both types sent: {}", run.out);

    // JSON: overall = the sum of the type rows, column by column
    let sum = |f: fn(&LoadTypeResult) -> u64| l.types.iter().map(f).sum::<u64>();
    let o = &l.overall;
    assert_eq!(
        [o.sent, o.received, o.expected, o.arrived, o.missing, o.unexpected],
        [
            sum(|t| t.sent),
            sum(|t| t.received),
            sum(|t| t.expected),
            sum(|t| t.arrived),
            sum(|t| t.missing),
            sum(|t| t.unexpected)
        ],
        "{o:?}"
    );
    // the requests' counts: their own row (expected and arrived are replies) and the
    // replies line; the relayed type's are its deliveries
    assert_eq!([save.sent, save.expected, save.arrived], [l.replies.expected, l.replies.expected, l.replies.arrived]);
    assert_eq!([cursor.expected, cursor.arrived], [l.deliveries.expected, l.deliveries.arrived]);
    assert_eq!(o.expected, l.deliveries.expected + l.replies.expected);
    assert_eq!(o.sent, l.sent, "every event sent, requests included");

    // the terminal: the same rows, the all row their sum
    let want = |t: &LoadTypeResult| (t.name.clone(), [t.sent, t.expected, t.arrived]);
    let wanted: Vec<(String, [u64; 3])> = l.types.iter().chain([&l.overall]).map(want).collect();
    let text = text_rows(&run.out);
    assert_eq!(text, wanted, "{}", run.out);
    let (s, all) = sum_and_all(&text);
    assert_eq!(s, all, "{}", run.out);
    assert!(
        run.out.contains(&format!("replies: {} expected, {} arrived", l.replies.expected, l.replies.arrived)),
        "{}",
        run.out
    );

    // `report` of the saved run prints the same table
    let again = wirebench(&["report", "-v", json.to_str().unwrap()]);
    assert_eq!(again.code, 0, "{}", again.err);
    assert_eq!(text_rows(&again.out), wanted, "{}", again.out);

    // the HTML page: the same rows (all first), the all row their sum
    let html = dir.path().join("rows.html");
    let page = wirebench(&["report", json.to_str().unwrap(), "--html", html.to_str().unwrap()]);
    assert_eq!(page.code, 0, "{}", page.err);
    let rows = html_rows(&std::fs::read_to_string(&html).unwrap());
    let mut expect_html = wanted.clone();
    expect_html.rotate_right(1);
    assert_eq!(rows, expect_html);
    let (s, all) = sum_and_all(&rows);
    assert_eq!(s, all);
}
