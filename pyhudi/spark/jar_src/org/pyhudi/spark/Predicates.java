package org.pyhudi.spark;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.List;
import org.apache.spark.sql.catalyst.expressions.And;
import org.apache.spark.sql.catalyst.expressions.AttributeReference;
import org.apache.spark.sql.catalyst.expressions.BinaryComparison;
import org.apache.spark.sql.catalyst.expressions.EqualNullSafe;
import org.apache.spark.sql.catalyst.expressions.EqualTo;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.GreaterThan;
import org.apache.spark.sql.catalyst.expressions.GreaterThanOrEqual;
import org.apache.spark.sql.catalyst.expressions.In;
import org.apache.spark.sql.catalyst.expressions.InSet;
import org.apache.spark.sql.catalyst.expressions.IsNotNull;
import org.apache.spark.sql.catalyst.expressions.IsNull;
import org.apache.spark.sql.catalyst.expressions.LessThan;
import org.apache.spark.sql.catalyst.expressions.LessThanOrEqual;
import org.apache.spark.sql.catalyst.expressions.Literal;
import org.apache.spark.sql.catalyst.expressions.StartsWith;
import org.apache.spark.sql.types.BooleanType;
import org.apache.spark.sql.types.ByteType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DateType;
import org.apache.spark.sql.types.Decimal;
import org.apache.spark.sql.types.DecimalType;
import org.apache.spark.sql.types.IntegerType;
import org.apache.spark.sql.types.LongType;
import org.apache.spark.sql.types.ShortType;
import org.apache.spark.sql.types.StringType;
import org.apache.spark.sql.types.TimestampType;
import org.apache.spark.unsafe.types.UTF8String;
import scala.jdk.javaapi.CollectionConverters;

/**
 * A query's filters as the predicates pyhudi prunes by: [[column, op, {"t": domain, "v": value}], ...], one per
 * conjunct on a top-level column compared with literals of a type pruning can judge (strings, integers,
 * booleans, decimals, dates, timestamps); any other filter is left out (it prunes nothing, Spark evaluates it).
 */
final class Predicates {
  private static final ObjectMapper JSON = new ObjectMapper();

  private Predicates() {}

  static String toJson(List<Expression> filters) {
    ArrayNode out = JSON.createArrayNode();
    for (Expression e : filters) {
      add(e, out);
    }
    return out.toString();
  }

  private static void add(Expression e, ArrayNode out) {
    if (e instanceof And a) {
      add(a.left(), out);
      add(a.right(), out);
    } else if (e instanceof IsNull n && n.child() instanceof AttributeReference c) {
      out.add(pred(c, "is_null"));
    } else if (e instanceof IsNotNull n && n.child() instanceof AttributeReference c) {
      out.add(pred(c, "not_null"));
    } else if (e instanceof StartsWith s && s.left() instanceof AttributeReference c
        && s.right() instanceof Literal l) {
      ObjectNode v = value(l.value(), l.dataType());
      if (v != null) {
        out.add(pred(c, "starts_with").add(v));
      }
    } else if (e instanceof In in && in.value() instanceof AttributeReference c) {
      ArrayNode vs = JSON.createArrayNode();
      for (Expression x : CollectionConverters.asJava(in.list())) {
        ObjectNode v = x instanceof Literal l ? value(l.value(), l.dataType()) : null;
        if (v == null) {
          return;
        }
        vs.add(v);
      }
      out.add(pred(c, "in").add(vs));
    } else if (e instanceof InSet in && in.child() instanceof AttributeReference c) {
      ArrayNode vs = JSON.createArrayNode();
      for (Object x : CollectionConverters.asJava(in.hset())) {
        ObjectNode v = value(x, c.dataType());
        if (v == null) {
          return;
        }
        vs.add(v);
      }
      out.add(pred(c, "in").add(vs));
    } else if (e instanceof BinaryComparison b) {
      String op = op(b);
      if (op == null) {
        return;
      }
      if (b.left() instanceof AttributeReference c && b.right() instanceof Literal l) {
        ObjectNode v = value(l.value(), l.dataType());
        if (v != null) {
          out.add(pred(c, op).add(v));
        }
      } else if (b.right() instanceof AttributeReference c && b.left() instanceof Literal l) {
        ObjectNode v = value(l.value(), l.dataType());
        if (v != null) {
          out.add(pred(c, flip(op)).add(v));
        }
      }
    }
  }

  private static ArrayNode pred(AttributeReference c, String op) {
    return JSON.createArrayNode().add(c.name()).add(op);
  }

  private static String op(BinaryComparison b) {
    if (b instanceof EqualTo) {
      return "=";
    } else if (b instanceof EqualNullSafe) {
      return "<=>";
    } else if (b instanceof LessThan) {
      return "<";
    } else if (b instanceof LessThanOrEqual) {
      return "<=";
    } else if (b instanceof GreaterThan) {
      return ">";
    } else if (b instanceof GreaterThanOrEqual) {
      return ">=";
    }
    return null;
  }

  private static String flip(String op) {
    return switch (op) {
      case "<" -> ">";
      case "<=" -> ">=";
      case ">" -> "<";
      case ">=" -> "<=";
      default -> op;
    };
  }

  /** A literal's value tagged with its domain; null for a type pruning does not judge. */
  private static ObjectNode value(Object v, DataType t) {
    ObjectNode n = JSON.createObjectNode();
    if (v == null) {
      return n.put("t", "null");
    } else if (t instanceof StringType) {
      UTF8String s = (UTF8String) v;
      // bytes that are not UTF-8 have no string to compare statistics with: such a literal prunes nothing
      return s.isValid() ? n.put("t", "str").put("v", s.toString()) : null;
    } else if (t instanceof IntegerType || t instanceof LongType || t instanceof ShortType
        || t instanceof ByteType) {
      return n.put("t", "int").put("v", ((Number) v).longValue());
    } else if (t instanceof BooleanType) {
      return n.put("t", "bool").put("v", (Boolean) v);
    } else if (t instanceof DecimalType) {
      return n.put("t", "dec").put("v", ((Decimal) v).toJavaBigDecimal().toPlainString());
    } else if (t instanceof DateType) {
      return n.put("t", "date").put("v", ((Number) v).intValue());
    } else if (t instanceof TimestampType) {
      return n.put("t", "ts").put("v", ((Number) v).longValue());
    }
    return null;
  }
}
