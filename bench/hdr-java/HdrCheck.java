// Checks wirebench's latency figures against HdrHistogram's own Java library.
//
//   java -cp HdrHistogram-2.2.2.jar bench/hdr-java/HdrCheck.java REPORT.json [DIST.hgrm] [LOG.hlog]
//
// For every latency view in REPORT.json (any mode: ping, proxy, load) it decodes the embedded
// histogram with the Java library and compares, value for value, what wirebench wrote:
// count, min, max, mean, standard deviation and every summary percentile against
// getValueAtPercentile. With DIST.hgrm (written by `ping --hgrm`) it compares the file, line
// for line, with the Java library's outputPercentileDistribution of the same histogram (the
// combined view, else the first responder's). With LOG.hlog (`ping --hlog`) it reads the log
// with HistogramLogReader and checks that the intervals add up to the main view's count
// and maximum. Prints one line per comparison and "N passed, M failed"; exits 1 on any
// mismatch. Run by bench/hdr-java.sh.

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Base64;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.HdrHistogram.EncodableHistogram;
import org.HdrHistogram.Histogram;
import org.HdrHistogram.HistogramLogReader;

public class HdrCheck {
    static int passed = 0, failed = 0;

    static void check(String what, Object ours, Object java) {
        boolean ok = ours.equals(java);
        if (ok) passed++; else failed++;
        System.out.printf("%-4s %-58s wirebench %-14s java %s%n", ok ? "ok" : "FAIL", what, ours, java);
    }

    static void checkClose(String what, double ours, double java) {
        boolean ok = Math.abs(ours - java) <= 1e-9 * Math.max(1.0, Math.abs(java));
        if (ok) passed++; else failed++;
        System.out.printf("%-4s %-58s wirebench %-14s java %s%n", ok ? "ok" : "FAIL", what, ours, java);
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 1) {
            System.err.println("usage: HdrCheck REPORT.json [DIST.hgrm] [LOG.hlog]");
            System.exit(2);
        }
        Object report = new Json(Files.readString(Path.of(args[0]))).value();
        List<String> paths = new ArrayList<>();
        List<Map<String, Object>> views = new ArrayList<>();
        collectViews(report, "$", paths, views);
        if (views.isEmpty()) {
            System.err.println("no latency views in " + args[0]);
            System.exit(2);
        }
        Histogram main = null;
        String mainPath = null;
        for (int i = 0; i < views.size(); i++) {
            String path = paths.get(i);
            Map<String, Object> v = views.get(i);
            Histogram h = decode((String) v.get("histogram"));
            @SuppressWarnings("unchecked")
            Map<String, Object> s = (Map<String, Object>) v.get("summary");
            long count = num(s.get("count")).longValue();
            check(path + " count", count, h.getTotalCount());
            if (count == 0) continue;
            check(path + " min", num(s.get("min_ns")).longValue(), h.getMinValue());
            check(path + " max", num(s.get("max_ns")).longValue(), h.getMaxValue());
            checkClose(path + " mean", num(s.get("mean_ns")).doubleValue(), h.getMean());
            checkClose(path + " sd", num(s.get("stddev_ns")).doubleValue(), h.getStdDeviation());
            @SuppressWarnings("unchecked")
            List<Object> ps = (List<Object>) s.get("percentiles");
            for (Object o : ps) {
                @SuppressWarnings("unchecked")
                Map<String, Object> q = (Map<String, Object>) o;
                double p = num(q.get("p")).doubleValue();
                check(path + " p" + q.get("p"), num(q.get("ns")).longValue(), h.getValueAtPercentile(p));
            }
            boolean isMain = path.endsWith(".combined") || (mainPath == null && path.endsWith("responders[0].latency"));
            if (isMain) {
                main = h;
                mainPath = path;
            }
        }
        if (args.length > 1 && main != null) {
            ByteArrayOutputStream buf = new ByteArrayOutputStream();
            main.outputPercentileDistribution(new PrintStream(buf, true, StandardCharsets.UTF_8), 5, 1000.0);
            String[] java = buf.toString(StandardCharsets.UTF_8).split("\n", -1);
            String[] ours = Files.readString(Path.of(args[1])).split("\n", -1);
            int differ = 0;
            String first = null;
            for (int i = 0; i < Math.max(java.length, ours.length); i++) {
                String a = i < ours.length ? ours[i] : "<none>";
                String b = i < java.length ? java[i] : "<none>";
                if (!a.equals(b)) {
                    differ++;
                    if (first == null) first = "line " + (i + 1) + ":\n  wirebench |" + a + "|\n  java      |" + b + "|";
                }
            }
            check(args[1] + " lines differing from outputPercentileDistribution(" + mainPath + ")", differ, 0);
            if (first != null) System.out.println(first);
        }
        if (args.length > 2 && main != null) {
            HistogramLogReader r = new HistogramLogReader(args[2]);
            Histogram sum = null;
            int n = 0;
            for (EncodableHistogram e = r.nextIntervalHistogram(); e != null; e = r.nextIntervalHistogram()) {
                Histogram h = (Histogram) e;
                if (sum == null) sum = new Histogram(h.getLowestDiscernibleValue(), h.getHighestTrackableValue(), 3);
                sum.add(h);
                n++;
            }
            System.out.println("     " + args[2] + ": " + n + " intervals");
            check(args[2] + " total count", sum == null ? 0L : sum.getTotalCount(), main.getTotalCount());
            check(args[2] + " max", sum == null ? 0L : sum.getMaxValue(), main.getMaxValue());
            if (sum != null) {
                check(args[2] + " p99.9 of the merged intervals", sum.getValueAtPercentile(99.9), main.getValueAtPercentile(99.9));
            }
        }
        System.out.println(passed + " passed, " + failed + " failed");
        System.exit(failed == 0 ? 0 : 1);
    }

    static Histogram decode(String b64) throws Exception {
        return Histogram.decodeFromCompressedByteBuffer(ByteBuffer.wrap(Base64.getDecoder().decode(b64)), 0);
    }

    static Number num(Object o) {
        return (Number) o;
    }

    /** Every object with a "summary" and a base64 "histogram": a wirebench LatencyView. */
    @SuppressWarnings("unchecked")
    static void collectViews(Object node, String path, List<String> paths, List<Map<String, Object>> out) {
        if (node instanceof Map) {
            Map<String, Object> m = (Map<String, Object>) node;
            if (m.get("summary") instanceof Map && m.get("histogram") instanceof String) {
                paths.add(path);
                out.add(m);
                return;
            }
            for (Map.Entry<String, Object> e : m.entrySet()) collectViews(e.getValue(), path + "." + e.getKey(), paths, out);
        } else if (node instanceof List) {
            List<Object> l = (List<Object>) node;
            for (int i = 0; i < l.size(); i++) collectViews(l.get(i), path + "[" + i + "]", paths, out);
        }
    }

    /** A small JSON reader: objects, arrays, strings, numbers (Long when integral), literals. */
    static final class Json {
        final String s;
        int i = 0;

        Json(String s) {
            this.s = s;
        }

        Object value() {
            ws();
            char c = s.charAt(i);
            if (c == '{') return object();
            if (c == '[') return array();
            if (c == '"') return string();
            if (s.startsWith("true", i)) { i += 4; return Boolean.TRUE; }
            if (s.startsWith("false", i)) { i += 5; return Boolean.FALSE; }
            if (s.startsWith("null", i)) { i += 4; return null; }
            return number();
        }

        Map<String, Object> object() {
            Map<String, Object> m = new LinkedHashMap<>();
            i++;
            ws();
            if (s.charAt(i) == '}') { i++; return m; }
            while (true) {
                ws();
                String k = string();
                ws();
                expect(':');
                m.put(k, value());
                ws();
                if (s.charAt(i) == ',') { i++; continue; }
                expect('}');
                return m;
            }
        }

        List<Object> array() {
            List<Object> l = new ArrayList<>();
            i++;
            ws();
            if (s.charAt(i) == ']') { i++; return l; }
            while (true) {
                l.add(value());
                ws();
                if (s.charAt(i) == ',') { i++; continue; }
                expect(']');
                return l;
            }
        }

        String string() {
            expect('"');
            StringBuilder b = new StringBuilder();
            while (s.charAt(i) != '"') {
                char c = s.charAt(i++);
                if (c == '\\') {
                    char e = s.charAt(i++);
                    switch (e) {
                        case 'n': b.append('\n'); break;
                        case 't': b.append('\t'); break;
                        case 'r': b.append('\r'); break;
                        case 'b': b.append('\b'); break;
                        case 'f': b.append('\f'); break;
                        case 'u': b.append((char) Integer.parseInt(s.substring(i, i + 4), 16)); i += 4; break;
                        default: b.append(e);
                    }
                } else {
                    b.append(c);
                }
            }
            i++;
            return b.toString();
        }

        Number number() {
            int start = i;
            while (i < s.length() && "+-0123456789.eE".indexOf(s.charAt(i)) >= 0) i++;
            String t = s.substring(start, i);
            if (t.isEmpty()) throw new IllegalArgumentException("bad JSON at " + start);
            if (t.indexOf('.') < 0 && t.indexOf('e') < 0 && t.indexOf('E') < 0) return Long.parseLong(t);
            return Double.parseDouble(t);
        }

        void ws() {
            while (i < s.length() && Character.isWhitespace(s.charAt(i))) i++;
        }

        void expect(char c) {
            if (s.charAt(i) != c) throw new IllegalArgumentException("expected " + c + " at " + i);
            i++;
        }
    }
}
