// Files opened or dropped into the playground: text and JSON as they are, and SillyTavern's PNG cards read in the
// page (the card data is the base64 JSON of the PNG's "ccv3" or "chara" text chunk, ccv3 first, as SillyTavern reads
// it). Nothing is uploaded anywhere but to this service, and only when the page runs.

const PNG = [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a];

function isPng(bytes) {
  return bytes.length >= 8 && PNG.every((b, i) => bytes[i] === b);
}

function base64Utf8(text) {
  const binary = atob(text.trim());
  const bytes = Uint8Array.from(binary, (c) => c.charCodeAt(0));
  return new TextDecoder("utf-8", { fatal: true }).decode(bytes);
}

export function pngCard(bytes) {
  // the card object of a PNG card; an Error naming what is missing otherwise
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const texts = {};
  let at = 8;
  while (at + 8 <= bytes.length) {
    const length = view.getUint32(at);
    const type = String.fromCharCode(...bytes.subarray(at + 4, at + 8));
    const body = bytes.subarray(at + 8, at + 8 + length);
    if (type === "tEXt") {
      const zero = body.indexOf(0);
      if (zero > 0) {
        const keyword = String.fromCharCode(...body.subarray(0, zero)).toLowerCase();
        texts[keyword] = String.fromCharCode(...body.subarray(zero + 1));
      }
    }
    if (type === "IEND") break;
    at += 12 + length;
  }
  const chunk = texts.ccv3 ?? texts.chara;
  if (chunk === undefined) throw new Error("the PNG holds no card (no ccv3 or chara text chunk)");
  return JSON.parse(base64Utf8(chunk));
}

export async function readFile(file) {
  // {value, kind}: a PNG card's object, a JSON file's value, or the text of anything else
  const bytes = new Uint8Array(await file.arrayBuffer());
  if (isPng(bytes)) return { value: pngCard(bytes), kind: "card" };
  let text = new TextDecoder("utf-8").decode(bytes);
  if (text.startsWith("\ufeff")) text = text.slice(1);
  try {
    return { value: JSON.parse(text), kind: "json" };
  } catch {
    return { value: text, kind: "text" };
  }
}

export function requestPartOf(value, kind) {
  // which field of a request file a JSON asset fills: the card, the preset, a book or the chat
  if (kind === "card") return "card";
  if (Array.isArray(value)) return "chat";
  if (!value || typeof value !== "object") return null;
  if (value.spec || (value.data && typeof value.data === "object" && "name" in value.data)) return "card";
  if (Array.isArray(value.prompts) || Array.isArray(value.prompt_order)) return "preset";
  if (value.entries && typeof value.entries === "object") return "books";
  if (Array.isArray(value.messages)) return "chat";
  return null;
}
