/**
 * Images pasted or dropped into the chat's prompt: read as base64 `image`
 * blocks and shown as chips under the prompt until it is sent. The daemon
 * checks the size and whether the model reads images.
 */
import type { PromptImage } from '../src/chat/messages';

/** The types every provider takes (protocol.md, `tandem/prompt`). */
export const IMAGE_TYPES = ['image/png', 'image/jpeg', 'image/gif', 'image/webp'];

/** The image files of a paste or a drop, in order. */
export function imageFiles(data: DataTransfer | null): File[] {
  if (!data) return [];
  const files: File[] = [];
  for (const item of Array.from(data.items ?? [])) {
    if (item.kind !== 'file' || !IMAGE_TYPES.includes(item.type)) continue;
    const file = item.getAsFile();
    if (file) files.push(file);
  }
  if (files.length === 0) {
    for (const file of Array.from(data.files ?? [])) if (IMAGE_TYPES.includes(file.type)) files.push(file);
  }
  return files;
}

/** Reads a file as an image block (its base64 without the `data:` prefix). */
export function readImage(file: File): Promise<PromptImage> {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => {
      const url = String(reader.result);
      resolve({ mimeType: file.type, data: url.slice(url.indexOf(',') + 1), bytes: file.size });
    };
    reader.onerror = () => reject(reader.error ?? new Error('the image could not be read'));
    reader.readAsDataURL(file);
  });
}

/** `image (png, 12 KB)`, as the chat and `tandem replay` name an image. */
export function imageLabel(image: { mimeType: string; bytes: number }): string {
  const kind = image.mimeType.replace(/^image\//, '').replace('jpeg', 'jpg');
  const kb = image.bytes / 1024;
  const size = image.bytes < 1024 ? `${image.bytes} B` : kb < 1024 ? `${Math.round(kb)} KB` : `${(kb / 1024).toFixed(1)} MB`;
  return `image (${kind}, ${size})`;
}
