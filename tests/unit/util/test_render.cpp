// The report media: Markdown values, YAML scalars, display widths, and the
// width a table is cut to.

#include "idem/util/detail/yaml_support.hpp"
#include "idem/util/render.hpp"

#include <doctest/doctest.h>

using namespace idem;

TEST_CASE("a Markdown value holds no HTML, no cell break, no code span, no line") {
    CHECK(markdown_text("<img src=x onerror=alert(1)>") == "&lt;img src=x onerror=alert(1)&gt;");
    CHECK(markdown_text("</script><script>") == "&lt;/script&gt;&lt;script&gt;");
    CHECK(markdown_text("a|b") == "a\\|b");
    CHECK(markdown_text("`code`") == "\\`code\\`");
    CHECK(markdown_text("row\n| forged | row |\n# heading") ==
          "row\\\\x0a\\| forged \\| row \\|\\\\x0a# heading");
    CHECK(markdown_text("[link](javascript:x) **b** _i_ ~s~") ==
          "\\[link\\](javascript:x) \\*\\*b\\*\\* \\_i\\_ \\~s\\~");
    CHECK(markdown_text("a&amp;b") == "a&amp;amp;b");
    CHECK(markdown_text("\x1b[31mred\xc2\x9b") == "\\\\x1b\\[31mred\\\\u{009B}");
    CHECK(markdown_text("caf\xc3\xa9") == "caf\xc3\xa9");
}

TEST_CASE("a YAML scalar reads back as the value it quotes") {
    const std::vector<std::string> values = {"plain",
                                             "a: #b",
                                             "line\nbreak\r\tx",
                                             "esc\x1b[2J",
                                             "del\x7f",
                                             "c1\xc2\x85\xc2\x9b",
                                             "bidi\xe2\x80\xae\xe2\x81\xa6",
                                             "zw\xe2\x80\x8b\xef\xbb\xbf",
                                             "sep\xe2\x80\xa8",
                                             "q\"\\'",
                                             "yes",
                                             "",
                                             "- [x]",
                                             "caf\xc3\xa9 \xe6\x97\xa5\xf0\x9f\x98\x80"};
    for (const auto& value : values) {
        auto quoted = yaml_quoted(value);
        for (char c : quoted)
            CHECK(static_cast<unsigned char>(c) >= 0x20);
        CHECK(quoted.find('\x7f') == std::string::npos);
        auto node = idem::detail::load_yaml("v: " + quoted + "\n", "test.yaml");
        CHECK(node["v"].as<std::string>() == value);
    }
    CHECK(yaml_quoted("bidi\xe2\x80\xae") == "\"bidi\\u202e\"");
    CHECK(yaml_quoted("caf\xc3\xa9") == "\"caf\xc3\xa9\"");
}

TEST_CASE("display width: wide characters two columns, combining marks none") {
    CHECK(display_width("abc") == 3);
    CHECK(display_width("\xe6\x97\xa5\xe6\x9c\xac") == 4); // 日本
    CHECK(display_width("e\xcc\x81") == 1);                // e + combining acute
    CHECK(display_width("\xf0\x9f\x98\x80") == 2);         // an emoji
}

TEST_CASE("a line is cut to its width on a character boundary") {
    CHECK(fit_line("short", 80) == "short");
    CHECK(fit_line("abcdefghij", 8) == "abcde...");
    CHECK(fit_line("abcdefghij", k_never_cut) == "abcdefghij");
    // 日本語日本語: six wide characters, twelve columns; cut to 8, five
    // columns of characters fit before the ellipsis: two characters.
    auto cut =
        fit_line("\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e", 8);
    CHECK(cut == "\xe6\x97\xa5\xe6\x9c\xac...");
    CHECK(display_width(cut) <= 8);
    // A combining mark stays with its letter.
    CHECK(fit_line("ab\xcc\x81"
                   "cdefgh",
                   5) == "ab\xcc\x81...");
    CHECK(fit_line("ab\xcc\x81"
                   "cdefgh",
                   6) == "ab\xcc\x81"
                         "c...");
    CHECK(fit_lines("0123456789\nab\n", 6) == "012...\nab\n");
}

TEST_CASE("the width a table is cut to: the terminal's, COLUMNS, or never") {
    ReaderWidth reader;
    CHECK(table_width(reader) == k_never_cut); // a file or a pipe
    reader.columns_variable = "200";
    CHECK(table_width(reader) == k_never_cut); // COLUMNS does not cut a pipe
    reader.to_terminal = true;
    CHECK(table_width(reader) == 200);
    reader.terminal_columns = 132;
    CHECK(table_width(reader) == 200); // the user's setting first
    reader.columns_variable = "wide";
    CHECK(table_width(reader) == 132);
    reader.columns_variable = "";
    reader.terminal_columns = 0;
    CHECK(table_width(reader) == 80);
    reader.wide = true;
    CHECK(table_width(reader) == k_never_cut);
}

TEST_CASE("a JSON report escapes what a terminal would obey, and parses the same") {
    auto json = std::string("{\"a\": \"x\x7f\xc2\x9b"
                            "31m\xe2\x80\xae\xe2\x80\x8b\xe2\x80\xa8 caf\xc3\xa9\"}\n");
    auto safe = json_report_text(json);
    CHECK(safe == "{\"a\": \"x\\u007f\\u009b31m\\u202e\\u200b\\u2028 caf\xc3\xa9\"}\n");
    CHECK(json_report_text("{\"plain\": [1, 2]}") == "{\"plain\": [1, 2]}");
}

TEST_CASE("a report's text is taken as it is exactly when escaping would leave it so") {
    // Every byte value, at every place in an eight-byte word and in the
    // tail after the last whole word, beside plain ASCII on both sides.
    for (int byte = 0; byte < 256; ++byte)
        for (std::size_t at = 0; at < 19; ++at) {
            std::string text(19, 'a');
            text[at] = static_cast<char>(byte);
            CAPTURE(byte);
            CAPTURE(at);
            CHECK(is_json_report_text(text) == (byte < 0x7f));
            if (byte < 0x7f) CHECK(json_report_text(text) == text);
        }
    CHECK(is_json_report_text(""));
    CHECK(is_json_report_text(std::string(64, '~'))); // 0x7e, the last byte kept
    CHECK_FALSE(is_json_report_text("caf\xc3\xa9"));
}

TEST_CASE("Mermaid and DOT labels stay inside their statement") {
    CHECK(mermaid_label("a;b\"c\nd --> e #x <b>&") ==
          "a#59;b#quot;c\\x0ad --#gt; e #35;x #lt;b#gt;#amp;");
    CHECK(dot_quoted("a\"b\\c\nd") == "\"a\\\"b\\\\c\\\\x0ad\"");
}
